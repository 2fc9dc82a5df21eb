"""What rollout workers and inference servers tell the learner's side, through one queue, and what
the learner tells an inference server. Messages are small: trajectory data stays in the shared
buffers and only slot indices (or a tensor's sharing handle) travel."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional

from sf_hydra.core.game_results import Game


@dataclass
class WorkerReady:
    """The worker built its envs and its policy copy."""

    worker_id: int


@dataclass
class WorkerFailed:
    """The worker raised; `traceback` is its formatted traceback."""

    worker_id: int
    traceback: str


@dataclass
class DeviceWeights:
    """Learner -> inference server (through the server's control pipe): policy `policy`'s weights
    are published from now on into `flat`, a tensor on the learner's CUDA device shared by IPC
    handle (PolicyStore.share_on_device)."""

    policy: int
    flat: object  # torch.Tensor; not imported here: messages stay light


@dataclass
class ServerFailed:
    """An inference server raised (hardware.inference=server); `traceback` is its formatted traceback."""

    server_id: int
    traceback: str


class Episode(NamedTuple):
    """A game that ended: its return and length, the agent's index in a multi-agent env (None
    for single-agent envs), the policy that played it (>= num_policies: a snapshot) and the
    statistics the env reported for it (envs/episode_info.py EPISODE_STATS), if any, and its
    true return: `ret` without the bonus of the policy's own reward-shaping weights (None: the
    worker adds no such bonus, so the true return is `ret`)."""

    ret: float
    length: int
    agent: Optional[int] = None
    policy: int = 0
    extra: Optional[Dict[str, float]] = None
    true_ret: Optional[float] = None


@dataclass
class Trajectories:
    """Slots the worker filled, the episodes that ended meanwhile, frames simulated, the
    seconds the rollout spent on inference, env steps, waiting for free slots and
    bookkeeping, the games of two or more players that ended (sf_hydra/core/game_results.py Game,
    sampler/policy_mapping.py), the non-finite env values replaced by 0 (env.nonfinite=replace) and
    the envs re-created after a crash or a hang (hardware.max_env_restarts)."""

    worker_id: int
    slots: List[int]
    episodes: List[Episode]
    frames: int
    timing: Dict[str, float]
    games: List[Game] = field(default_factory=list)
    nonfinite_replaced: int = 0
    env_restarts: int = 0
    sent_at: float = field(default_factory=time.time)  # the worker's wall clock when it reported them
    began_at: float = 0.0  # ... when it began this rollout (0: unknown); `timing` covers began_at to sent_at
