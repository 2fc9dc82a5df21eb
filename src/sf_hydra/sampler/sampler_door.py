"""The sampler's side of the door (sf_hydra/core/door.py): the only way in for the learner's side."""

from __future__ import annotations

import threading
from typing import Dict, Optional, Sequence

from torch import nn

from sf_hydra.core.door import SamplerHealth
from sf_hydra.sampler.sampler import Sampler


class Door:
    """Implements `sf_hydra.core.door.SamplerDoor` over one Sampler. `frozen_after_start`: the weights never
    change once the workers run (the sampler benchmark, which learns nothing), so publishing then is
    skipped."""

    def __init__(self, sampler: Sampler, frozen_after_start: bool = False):
        self._sampler = sampler
        self._frozen_after_start = frozen_after_start
        self._stop = threading.Event()
        self._stream = None  # the TrainingBatches Lightning draws from (attach)
        self._first_versions: Dict[int, int] = {}  # policy -> the first version of its weights' line (replacements)

    def publish(self, policy: int, model: nn.Module, version: int) -> None:
        if self._frozen_after_start and self._sampler.started:
            return
        self._sampler.publish(policy, model, version)

    def publish_replacement(self, policy: int, model: nn.Module, version: int) -> None:
        self._first_versions[policy] = int(version)  # before the workers can act under it
        self.publish(policy, model, version)

    def first_version(self, policy: int) -> int:
        """The oldest version of `policy` whose trajectories may train it: the last replacement's (0: none)."""
        return self._first_versions.get(policy, 0)

    def publish_opponent(self, slot: int, model: nn.Module, generation: int,
                         odds: Optional[Sequence[float]] = None) -> None:
        self._sampler.publish_opponent(slot, model, generation, odds)

    def set_reward_shaping(self, policy: int, difference: Sequence[float]) -> None:
        self._sampler.set_reward_shaping(policy, difference)

    def set_opponent_odds(self, slot: int, odds: Sequence[float]) -> None:
        self._sampler.set_opponent_odds(slot, odds)

    def request_stop(self) -> None:
        self._stop.set()

    def stop_requested(self) -> bool:
        """The sampler's own question (TrainingBatches): has the learner's side asked for a stop?"""
        return self._stop.is_set()

    def health(self) -> SamplerHealth:
        return self._sampler.health()

    def attach(self, stream) -> None:
        """The TrainingBatches of the run (SamplerDataModule.train_dataloader)."""
        self._stream = stream

    def serial_state(self) -> Optional[dict]:
        """The serial workers' state (Sampler.serial_state). Lightning fetches a batch only when the learner
        asks for it, so at a learner step's end nothing is in flight, unless trajectories wait beyond the
        batches yielded (a refusal: their data is in the shared slots)."""
        if not self._sampler.serial:
            return None
        if self._stream is not None and self._stream.waiting:
            raise RuntimeError(f"{self._stream.waiting} trajectories wait for the next batch: the rollout workers' "
                               "state is not whole without them")
        return self._sampler.serial_state()

    def restore_serial_state(self, state: dict, generators: Optional[dict] = None,
                             origin: str = "the checkpoint") -> None:
        self._sampler.restore_serial_state(state, generators, origin)
