"""The learner's settings (LearnerSettings, filled by the run's plan, sf_hydra/plan.py) and its policies'
hyperparameters: their values at the start and the env's reward-shaping weights as hyperparameters (what
population-based training perturbs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Sequence, Tuple

import torch

from sf_hydra.config.choices import PBT_HYPERPARAMS
from sf_hydra.config.schema import AlgoConfig


def initial_hyperparams(algo) -> Dict[str, float]:
    """A policy's hyperparameters at the start: the algo.* values."""
    return {name: float(getattr(algo, name)) for name in PBT_HYPERPARAMS}


SHAPING = "reward_shaping."  # hyperparameter names of the env's shaping weights: reward_shaping.<name>.up|down


def shaping_hyperparams(shaping: Dict[str, Sequence[float]]) -> Dict[str, float]:
    """The env family's reward-shaping weights ({name: (up, down)}) as hyperparameters."""
    out = {}
    for name, (up, down) in shaping.items():
        out[f"{SHAPING}{name}.up"], out[f"{SHAPING}{name}.down"] = float(up), float(down)
    return out


def shaping_difference(hyper: Dict[str, float], shaping: Dict[str, Sequence[float]]) -> List[float]:
    """[2V] a policy's shaping weights minus the env's: the ups, then the downs (the order of
    the env's SHAPING_UNITS)."""
    ups = [hyper[f"{SHAPING}{n}.up"] - float(w[0]) for n, w in shaping.items()]
    return ups + [hyper[f"{SHAPING}{n}.down"] - float(w[1]) for n, w in shaping.items()]


@dataclass(frozen=True)
class LearnerSettings:
    """What PPOLearner reads besides its models: the algo's settings (typed), the resolved
    recurrence and micro-batch, and each policy's initial hyperparameters."""

    algo: AlgoConfig
    recurrence: int
    micro_batch: int  # 0: no split of a minibatch's backward pass
    stats_avg: int  # episodes averaged in the statistics
    train_for_env_steps: int  # the linear learning-rate decay's horizon
    benchmark: bool
    reward_shaping: Mapping[str, Tuple[float, float]]  # the env's weights; empty unless PBT perturbs them
    hyperparams: Tuple[Mapping[str, float], ...]  # per policy, at the start (pbt.initial_hyperparams applied)
    optimizer: Callable[..., torch.optim.Optimizer] = field(repr=False, default=None)  # called with parameters
    bf16: bool = False  # the learner's forward passes in bfloat16 autocast (hardware.learner_precision)
    compile: bool = False  # torch.compile of each policy's `evaluate` (hardware.learner_compile)

    @property
    def num_policies(self) -> int:
        return len(self.hyperparams)
