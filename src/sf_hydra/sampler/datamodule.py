"""The sampler as a LightningDataModule: Lightning asks it for batches and tears it down;
the LightningModule never sees a process."""

from __future__ import annotations

import threading
from typing import Optional

import lightning as L
from torch.utils.data import DataLoader

from sf_hydra.sampler.sampler import Sampler
from sf_hydra.sampler.training_batches import TrainingBatches


class SamplerDataModule(L.LightningDataModule):
    def __init__(self, cfg, obs_space, action_space, policy_source, num_agents: Optional[int],
                 sampler: Optional[Sampler] = None):
        """`policy_source` has `.policies` (models) and `.policy_versions` (the LightningModule).
        num_agents: None for a single-agent env, the count for a multi-agent env
        (`sampler.env_info.describe_env` reads all three from one env). sampler: one already made (and
        launched, see Sampler.launch) for the same spaces, else it is made at setup."""
        super().__init__()
        self.cfg, self.obs_space, self.action_space = cfg, obs_space, action_space
        self.num_agents = num_agents
        self.policy_source = policy_source
        self.sampler = sampler
        self._stop = threading.Event()

    def setup(self, stage: str) -> None:
        if self.sampler is None:
            self.sampler = Sampler(self.cfg, self.obs_space, self.action_space, self.policy_source.policies[0],
                                   self.num_agents)

    def _start_workers(self) -> None:
        """Started on first use, after a checkpoint was restored, so workers act with it."""
        self.publish()
        self.sampler.start()

    def publish(self, policy: Optional[int] = None) -> None:
        """The weights of `policy` (None: every policy) go to the rollout workers."""
        source = self.policy_source
        if self.cfg.get("benchmark", False) and self.sampler.started:
            return  # benchmark: the weights never change after the workers got them
        for k in range(len(source.policies)) if policy is None else [policy]:
            self.sampler.publish(k, source.policies[k], source.policy_versions[k])

    def current_version(self, policy: int) -> int:
        return self.policy_source.policy_versions[policy]

    def request_stop(self) -> None:
        self._stop.set()

    def train_dataloader(self) -> DataLoader:
        stream = TrainingBatches(self.sampler, self.cfg, self.current_version, self._stop.is_set, self._start_workers)
        return DataLoader(stream, batch_size=None, num_workers=0)

    def teardown(self, stage: str) -> None:
        if self.sampler is not None:
            self.sampler.stop()
