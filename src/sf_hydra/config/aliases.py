"""Command-line spellings that Hydra cannot take as they are.

`experiment` is two things, as in Sample Factory and in lightning-hydra-template: the run's
name (`experiment=my_run`, a plain key) and a preset (`+experiment=doom_battle`). Hydra
treats a key that is also a config group as the group, so the presets live in the group
`experiments` (the folder's name) and `+experiment=` is spelled `+experiments=` for Hydra.
"""

from __future__ import annotations

import os
from typing import List, Optional, Sequence

ALIASES = {"+experiment=": "+experiments="}
# `hardware.num_workers=auto`: as many rollout workers as this machine gives the run cores, counted where
# the run resolves its config (a Slurm or local_parallel job: on its own node, within its own pinning).
# With several learner ranks on the node (hardware.devices), each rank's share of them.
AUTO = {"hardware.num_workers=auto": "hardware.num_workers='${sf_cores:${hardware.devices}}'"}


def cores(ranks: int = 1) -> int:
    """The cores this process may run on (its CPU affinity: a Slurm allocation, a taskset, a container), shared
    by `ranks` learner ranks started on this machine from this process (at least 1 each). A task of a Slurm job
    step of several tasks is one rank with its own allocation already: its cores are all its own."""
    total = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    one_task_per_rank = int(os.environ.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in os.environ
    return total if one_task_per_rank else max(1, total // max(1, int(ranks)))


def apply_aliases(argv: Sequence[str]) -> List[str]:
    out = []
    for arg in argv:
        for alias, real in ALIASES.items():
            if arg.startswith(alias):
                arg = real + arg[len(alias):]
        out.append(AUTO.get(arg.lstrip("+"), arg))
    return out


def more_workers_than_cores(num_workers: int, num_envs_per_worker: int, devices: int = 1) -> Optional[str]:
    """One line for a run whose rollout workers outnumber the cores it may use (`cores`): a command line sized
    for a bigger machine (Sample Factory's `--num_workers=16 --num_envs_per_worker=10`) starts slowly and
    leaves the learner little time on such a box, without failing; the line says what
    `hardware.num_workers=auto` would pick here. None when every worker has a core."""
    available = cores(devices)
    if num_workers <= available:
        return None
    return (f"hardware.num_workers={num_workers} rollout workers ({num_envs_per_worker} envs each) share "
            f"{available} core{'s' if available > 1 else ''}: the start is slow and the learner gets little time; "
            f"hardware.num_workers=auto would pick {available} here")
