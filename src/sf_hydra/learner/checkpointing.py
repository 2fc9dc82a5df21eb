"""Periodic checkpoints by wall time (Lightning's ModelCheckpoint ignores its time interval
under manual optimization). Every file is written to a temporary name and renamed, so a
crash while saving never destroys the previous checkpoint. A save that fails (disk full, no
permission) ends the run with CheckpointSaveError: the path and the cause, no traceback."""

from __future__ import annotations

import os
import time
from pathlib import Path

import lightning as L

from sf_hydra.faults import CheckpointSaveError
from sf_hydra.run_dir import LAST


def save_atomically(trainer, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        trainer.save_checkpoint(tmp)
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise CheckpointSaveError(path, e) from e


class PeriodicCheckpoint(L.Callback):
    """Every `every_sec`: `checkpoint_<env steps>.ckpt` (the newest `keep` are kept) and
    `last.ckpt`, which a resume starts from."""

    def __init__(self, directory: Path, every_sec: float, keep: int):
        self.directory, self.every_sec, self.keep = Path(directory), every_sec, keep
        self._last_save = time.monotonic()

    def on_train_start(self, trainer, pl_module):
        self._last_save = time.monotonic()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if time.monotonic() - self._last_save >= self.every_sec:
            self.save(trainer, pl_module.env_steps)

    def save(self, trainer, env_steps: int) -> Path:
        numbered = self.directory / f"checkpoint_{env_steps:012d}.ckpt"
        save_atomically(trainer, numbered)
        save_atomically(trainer, self.directory / LAST)
        self._prune()
        self._last_save = time.monotonic()
        return numbered

    def _prune(self) -> None:
        numbered = sorted(self.directory.glob("checkpoint_*.ckpt"))
        for old in numbered[: max(0, len(numbered) - self.keep)]:
            old.unlink(missing_ok=True)
