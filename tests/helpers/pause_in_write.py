"""Holds a process still at a chosen point of one file's write through sf_hydra.core.files, so that a test can
kill it there (SIGKILL) and look at what the kill left: no timing guesses, and nothing in sf_hydra for tests.

`pause(point, target, marker)` wraps, in this process only, the two steps every write of the one writer goes
through (the fsync of a temporary file, then its rename): when the write of a file named like `target` (a glob
pattern, e.g. `checkpoint_*.ckpt`) reaches `point`, the process writes `point` into the file `marker` and waits
until it is killed. The points, in the order of a write:

    writing   the temporary file holds half of its bytes (the process dies in the middle of writing them)
    written   the temporary file is whole, not yet flushed to the disk nor renamed
    renamed   the file has just been renamed onto its final name (the folder not flushed yet; any file written
              with it, such as an export's description, not renamed yet)

A train.py run takes it as a callback from the command line (the pause is set up in the learner's process,
where checkpoints are written): `+callbacks.pause._target_=tests.helpers.pause_in_write.PauseInWrite`
`+callbacks.pause.point=written +callbacks.pause.target=last.ckpt +callbacks.pause.marker=<file>`."""

from __future__ import annotations

import fnmatch
import os
import threading
from pathlib import Path

import lightning as L

from sf_hydra.core import files

POINTS = ("writing", "written", "renamed")


def final_name(tmp: Path) -> str:
    """The name a temporary file of sf_hydra.core.files.temporary_name is renamed to."""
    return Path(tmp).name[1:].rsplit(".", 2)[0]


def _hold(point: str, marker: str) -> None:
    Path(marker).write_text(point)
    threading.Event().wait()  # until SIGKILL


def pause(point: str, target: str, marker: str) -> None:
    if point not in POINTS:
        raise ValueError(f"point={point!r}: one of {POINTS}")
    fsync_file, replace = files.fsync_file, os.replace

    def fsync_then_maybe_hold(path):
        if point in ("writing", "written") and fnmatch.fnmatch(final_name(path), target):
            if point == "writing":
                os.truncate(path, os.path.getsize(path) // 2)
            _hold(point, marker)
        fsync_file(path)

    def replace_then_maybe_hold(src, dst, *args, **kwargs):
        replace(src, dst, *args, **kwargs)
        if point == "renamed" and fnmatch.fnmatch(Path(dst).name, target):
            _hold(point, marker)

    files.fsync_file = fsync_then_maybe_hold
    os.replace = replace_then_maybe_hold


class PauseInWrite(L.Callback):
    """`pause` set up in the learner's process as training starts."""

    def __init__(self, point: str, target: str, marker: str):
        self.point, self.target, self.marker = point, target, marker

    def setup(self, trainer, pl_module, stage):
        pause(self.point, self.target, self.marker)
