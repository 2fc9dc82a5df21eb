"""The sampler as a LightningDataModule: Lightning asks it for batches and tears it down;
the LightningModule never sees a process. The learner's side reaches the sampler only through
`door` (sf_hydra/core/door.py)."""

from __future__ import annotations

import lightning as L
from torch.utils.data import DataLoader

from sf_hydra.sampler.sampler import Sampler
from sf_hydra.sampler.sampler_door import Door
from sf_hydra.sampler.settings import BatchSettings
from sf_hydra.sampler.training_batches import TrainingBatches


class SamplerDataModule(L.LightningDataModule):
    def __init__(self, sampler: Sampler, batches: BatchSettings):
        """sampler: made from the run's plan (and maybe launched already, see Sampler.launch); its
        workers get their slots on the first request for data, after the learner published its
        weights through the door (PublishPolicy.on_train_start), so that they act with a restored
        checkpoint's weights."""
        super().__init__()
        self.sampler, self.batches = sampler, batches
        self.door = Door(sampler, frozen_after_start=batches.benchmark)

    def _published_version(self, policy: int) -> int:
        """The learner's version of `policy`: it publishes after every update, before asking for data."""
        return self.sampler.stores[policy].current_version()

    def train_dataloader(self) -> DataLoader:
        stream = TrainingBatches(self.sampler, self.batches, self._published_version, self.door.stop_requested,
                                 self.sampler.start, first_version=self.door.first_version)
        self.door.attach(stream)
        return DataLoader(stream, batch_size=None, num_workers=0)

    def teardown(self, stage: str) -> None:
        self.sampler.stop()
