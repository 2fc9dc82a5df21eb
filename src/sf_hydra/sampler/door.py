"""The sampler's side of the door (sf_hydra/door.py): the only way in for the learner's side."""

from __future__ import annotations

import threading
from typing import Sequence

from torch import nn

from sf_hydra.door import SamplerHealth
from sf_hydra.sampler.sampler import Sampler


class Door:
    """Implements `sf_hydra.door.SamplerDoor` over one Sampler. `frozen_after_start`: the weights never
    change once the workers run (the sampler benchmark, which learns nothing), so publishing then is
    skipped."""

    def __init__(self, sampler: Sampler, frozen_after_start: bool = False):
        self._sampler = sampler
        self._frozen_after_start = frozen_after_start
        self._stop = threading.Event()

    def publish(self, policy: int, model: nn.Module, version: int) -> None:
        if self._frozen_after_start and self._sampler.started:
            return
        self._sampler.publish(policy, model, version)

    def publish_opponent(self, slot: int, model: nn.Module, generation: int) -> None:
        self._sampler.publish_opponent(slot, model, generation)

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
