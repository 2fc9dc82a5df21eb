"""What rollout workers tell the learner's side, through one queue. Messages are small:
trajectory data stays in the shared buffers and only slot indices travel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List


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
class Trajectories:
    """Slots the worker filled, the episodes that ended meanwhile (`(return, length)`, plus the
    agent's index for multi-agent envs), frames simulated, and the seconds the rollout spent
    on inference, env steps, waiting for free slots and bookkeeping."""

    worker_id: int
    slots: List[int]
    episodes: List[tuple]
    frames: int
    timing: Dict[str, float]
