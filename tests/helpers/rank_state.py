"""A callback that writes each learner rank's whole learner state when training ends, to compare the ranks of
a data-parallel run (`+callbacks.rank_state._target_=tests.helpers.rank_state.WriteRankState`)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch


class WriteRankState(L.Callback):
    """`<directory>/rank_<global rank>.pt`: the module's state_dict (weights, normalizer buffers), every optimizer's
    state_dict (Adam's moments, step counts, learning rates) and what the learner puts into a checkpoint of its
    own (versions, env steps, training time, episode windows, hyperparameters)."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def on_train_end(self, trainer, pl_module):
        own: dict = {}
        pl_module.on_save_checkpoint(own)
        state = {"weights": pl_module.state_dict(), "optimizers": [o.state_dict() for o in trainer.optimizers],
                 "sf_hydra": own["sf_hydra"]}
        self.directory.mkdir(parents=True, exist_ok=True)
        torch.save(state, self.directory / f"rank_{trainer.global_rank}.pt")


class WriteRankStateAtStart(WriteRankState):
    """As WriteRankState, when training starts (the checkpoint, if any, restored): every rank must start from the
    same learner state."""

    def on_train_start(self, trainer, pl_module):
        WriteRankState.on_train_end(self, trainer, pl_module)

    def on_train_end(self, trainer, pl_module):
        pass


class WriteRankMetrics(L.Callback):
    """`<directory>/metrics_rank_<global rank>.pt`: after every learner step, what the learner logs as the run's
    (policy 0's metrics and the run's own, learner/ppo_learner.py), a list in step order."""

    def __init__(self, directory: str):
        self.directory = Path(directory)
        self.steps: list = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.steps.append({**pl_module.stats[0].metrics, **pl_module.statistics.last_metrics})

    def on_train_end(self, trainer, pl_module):
        self.directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.steps, self.directory / f"metrics_rank_{trainer.global_rank}.pt")
