"""A callback that fails in one learner rank of a data-parallel run, as a bug of that rank's own would
(`+callbacks.fail._target_=tests.helpers.failing_callbacks.FailInRank +callbacks.fail.rank=0`)."""

from __future__ import annotations

import lightning as L


class FailInRank(L.Callback):
    """Raises RuntimeError("<message>") in rank `rank` after its `after` learner steps; the other ranks go on."""

    def __init__(self, rank: int, after: int = 2, message: str = "a bug of this rank's own"):
        self.rank, self.after, self.message = rank, after, message

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_rank == self.rank and trainer.global_step >= self.after:
            raise RuntimeError(self.message)
