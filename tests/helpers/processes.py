"""Finding the sampler's processes (rollout workers, inference servers) in a process tree."""

from __future__ import annotations

from typing import List, Optional

import psutil


def _cmdline(proc: Optional[psutil.Process]) -> str:
    try:
        return " ".join(proc.cmdline()) if proc is not None else ""
    except psutil.Error:
        return ""


def sampler_processes(root: Optional[psutil.Process] = None) -> List[psutil.Process]:
    """The live sampler processes below `root` (default: this process). The fork server
    (sampler/mp.py) forks them, so they carry its command line, one level below it; a spawned
    one runs `spawn_main`. The fork server itself, which outlives runs, is not one of them."""
    root = root or psutil.Process()
    found = []
    for proc in root.children(recursive=True):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            parent = proc.parent()
        except psutil.Error:
            continue
        cmd = _cmdline(proc)
        if "spawn_main" in cmd or ("forkserver" in cmd and "forkserver" in _cmdline(parent)):
            found.append(proc)
    return found
