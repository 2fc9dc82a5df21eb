"""A Lightning callback that sends its own process stop signals while a checkpoint is being written: the
signals land in the middle of a real save (Lightning calls `on_save_checkpoint` while it builds the file's
content, before anything is written). Added to a run from the command line:
`+callbacks.signal_in_save._target_=tests.helpers.signal_in_save.SignalDuringSave`
`+callbacks.signal_in_save.kind=best`."""

from __future__ import annotations

import os
import signal
import sys
import time

import lightning as L

# sf_hydra.learner.checkpointing's functions, innermost first, and the kind of save each one is
_SAVERS = {"_save_if_better": "best", "save_milestone": "milestone"}


def kind_of_save() -> str:
    """best, milestone, periodic (PeriodicCheckpoint.save when due) or final (train.py fit_rank's save after fit),
    read off the call stack of the save under way."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_name
        if name in _SAVERS:
            return _SAVERS[name]
        if name == "save" and frame.f_code.co_filename.endswith("checkpointing.py"):
            return "final" if frame.f_back is not None and frame.f_back.f_code.co_name == "fit_rank" else "periodic"
        frame = frame.f_back
    return "other"


class SignalDuringSave(L.Callback):
    """During the `at`-th save of `kind`, sends `signal` to this process `count` times, `gap_sec` apart (the
    handler runs at once, inside the save), then writes `<marker>` (if given) with the env steps of that save."""

    def __init__(self, kind: str, signal: str = "SIGINT", count: int = 1, gap_sec: float = 0.0, at: int = 1,
                 marker: str = ""):
        self.kind, self.signal, self.count, self.gap, self.at = kind, signal, count, gap_sec, at
        self.marker = marker
        self.seen = 0

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        if kind_of_save() != self.kind:
            return
        self.seen += 1
        if self.seen != self.at:
            return
        if self.marker:
            with open(self.marker, "w") as f:
                f.write(str(int(pl_module.env_steps)))
        for i in range(self.count):
            if i:
                time.sleep(self.gap)
            os.kill(os.getpid(), signal.Signals[self.signal])
        time.sleep(0.05)  # the save goes on after the handler ran


class SignalBeforeTraining(L.Callback):
    """Sends `signal` to this process from Lightning's `hook` before training starts: `setup` (before Lightning
    takes SIGTERM for itself) or `on_fit_start` (after: its handler and the run's both see it)."""

    def __init__(self, hook: str, signal: str = "SIGTERM"):
        self.hook, self.signal = hook, signal

    def _send(self, hook: str) -> None:
        if hook == self.hook:
            os.kill(os.getpid(), signal.Signals[self.signal])
            time.sleep(0.05)

    def setup(self, trainer, pl_module, stage):
        self._send("setup")

    def on_fit_start(self, trainer, pl_module):
        self._send("on_fit_start")
