"""The one door between the learner and the sampler.

The learner's side (its callbacks, population-based training, the opponent pool) asks the
sampler for exactly what `SamplerDoor` names, and nothing else: it never reads the sampler's
attributes and imports nothing from `sf_hydra.sampler`. The sampler's side implements it
(`sf_hydra.sampler.sampler_door.Door`) and hands it out as `SamplerDataModule.door`; Lightning callbacks
reach it with `door_of(trainer)`. Both sides import this module, which imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

from torch import nn


@dataclass(frozen=True)
class SamplerHealth:
    """What the sampler can say of its processes without waiting for a message.

    Invariant: 0 <= processes_alive <= processes; `slowest_worker_silent_sec` is 0.0 before any
    worker reported progress (and in serial mode, where the workers run in the learner's process)."""

    processes: int  # rollout workers and inference servers started (0 in serial mode)
    processes_alive: int
    slowest_worker_silent_sec: float  # seconds since the least recent progress of any rollout worker


class SamplerDoor(Protocol):
    """What the learner may ask of the sampler. Every call returns at once (no call waits for a
    worker); weights are copied into shared memory, never sent through a queue."""

    def publish(self, policy: int, model: nn.Module, version: int) -> None:
        """Trained policy `policy`'s weights (parameters and normalizer buffers) reach every rollout
        worker and inference server, which act with them from their next step. A worker reloads only
        when `version` changes: every change of the weights must come with a new version."""

    def publish_replacement(self, policy: int, model: nn.Module, version: int) -> None:
        """As `publish`, for weights that replace the policy's instead of descending from them (population-based
        training gave it a donor's): from now on the policy's trajectories that hold a step it acted under a
        version below `version` are dropped, however small their lag (they would train the new weights with
        the old ones' log-probs and values), as are those the workers were collecting when the new weights came."""

    def publish_opponent(self, slot: int, model: nn.Module, generation: int,
                         odds: Optional[Sequence[float]] = None) -> None:
        """The opponent pool's slot `slot` (0 <= slot < selfplay.pool_size) holds `model`, frozen, from
        now on; `generation` (> 0) is its version. `odds`: per trained policy, the weight of drawing it
        (as `set_opponent_odds`), set before the workers can see the new snapshot; None: even odds (1.0)."""

    def set_reward_shaping(self, policy: int, difference: Sequence[float]) -> None:
        """Policy `policy`'s reward-shaping weights minus the env's, per shaped quantity (up, down)."""

    def set_opponent_odds(self, slot: int, odds: Sequence[float]) -> None:
        """For each trained policy, the weight (>= 0) of drawing the opponent pool's slot `slot` as its
        opponent when a worker seats a game; a new snapshot takes the odds `publish_opponent` gives it."""

    def request_stop(self) -> None:
        """No more batches after the one being trained on; the sampler's processes stop at teardown."""

    def health(self) -> SamplerHealth:
        """Its processes now (a dead one also ends the next batch's wait with a SamplerError)."""

    def serial_state(self) -> Optional[dict]:
        """With hardware.serial_mode, between two learner steps: the rollout workers' state (their envs mid-
        episode with their generators, observations, episodes in progress), sealed with this user's key
        (sf_hydra.core.seal), as tensors and plain values for a checkpoint; None otherwise. Raises for envs
        that cannot be saved (pickled), or where no seal key can be made."""

    def restore_serial_state(self, state: dict, generators: Optional[dict] = None,
                             origin: str = "the checkpoint") -> None:
        """A checkpoint's `serial_state`, read from `origin`: the serial workers continue from it (put back when
        they are built), and then this process's random `generators` (sf_hydra.core.seeding.random_states) are
        put back. A state whose seals do not verify (a checkpoint from elsewhere) is never unpickled: one line
        naming `origin` says so, and only the generators are put back."""


def door_of(trainer) -> SamplerDoor:
    """The door of the run's sampler, from a Lightning trainer fitted with a SamplerDataModule."""
    return trainer.datamodule.door
