"""A callback that makes each learner step last at least a given time (`+callbacks.pace._target_=
tests.helpers.pace.PaceSteps +callbacks.pace.seconds=0.25`): a test that acts on a run mid-way (kills a node, sends
a signal) gets a run that cannot reach its budget before it acts, however fast the machine is that day."""

from __future__ import annotations

import time

import lightning as L


class PaceSteps(L.Callback):
    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self._started = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._started = time.monotonic()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self._started is not None:
            time.sleep(max(0.0, self.seconds - (time.monotonic() - self._started)))
