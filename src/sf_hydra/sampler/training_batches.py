"""Turns the workers' trajectory messages into training batches for the learner.

It is an IterableDataset with a (huge) length so that Lightning does not prefetch the next
batch before training on the current one: the synchronous mode and the policy-lag
accounting depend on asking for data only after the weights were published.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

import torch
from torch.utils.data import IterableDataset

from sf_hydra.sampler.sampler import Sampler, SamplerError

ENDLESS = 2**62


class TrainingBatches(IterableDataset):
    def __init__(self, sampler: Sampler, cfg, current_version: Callable[[], int], stop_requested: Callable[[], bool],
                 on_start: Callable[[], None]):
        self.sampler, self.cfg = sampler, cfg
        self.current_version, self.stop_requested, self.on_start = current_version, stop_requested, on_start
        self.traj_per_batch = cfg.algo.batch_size * cfg.algo.num_batches_per_epoch // cfg.algo.rollout
        self.sync = not cfg.algo.async_rl
        self.round_size = sampler.rows_total

    def __len__(self) -> int:
        return ENDLESS

    def __iter__(self):
        if not self.sampler.started:
            self.on_start()
        pending: deque = deque()
        consumed_in_round = 0
        frames, episodes, dropped, wait, timing = 0, [], 0, 0.0, {}
        while True:
            if self.sync and consumed_in_round >= self.round_size:
                self.sampler.release_round()
                consumed_in_round = 0
            t0 = time.monotonic()
            silent_since = t0
            while len(pending) < self.traj_per_batch:
                if self.stop_requested():
                    return
                traj = self.sampler.poll()
                if traj is None:
                    self._check_stall(silent_since)
                    continue
                silent_since = time.monotonic()
                pending.extend(traj.slots)
                frames += traj.frames
                episodes.extend(traj.episodes)
                for key, seconds in traj.timing.items():
                    timing[key] = timing.get(key, 0.0) + seconds
                if not self.sync:
                    dropped += self._drop_stale(pending)
            wait += time.monotonic() - t0
            slots = [pending.popleft() for _ in range(self.traj_per_batch)]
            consumed_in_round += len(slots)
            batch = self.sampler.buffers.gather(torch.tensor(slots, dtype=torch.int64))
            self.sampler.free(slots)
            batch["meta"] = {"frames": frames, "episodes": episodes, "dropped_trajectories": dropped,
                             "wait_seconds": wait, "worker_seconds": timing}
            frames, episodes, dropped, wait, timing = 0, [], 0, 0.0, {}
            yield batch

    def _drop_stale(self, pending: deque) -> int:
        """Frees trajectories whose oldest step is more than max_policy_lag versions old."""
        oldest_allowed = self.current_version() - self.cfg.algo.max_policy_lag
        slots = torch.tensor(list(pending), dtype=torch.int64)
        stale_mask = self.sampler.buffers["policy_versions"][slots, 0] < oldest_allowed
        stale = slots[stale_mask].tolist()
        if stale:
            pending.clear()
            pending.extend(slots[~stale_mask].tolist())
            self.sampler.free(stale)
        return len(stale)

    def _check_stall(self, silent_since: float) -> None:
        limit = self.cfg.hardware.worker_stall_timeout_sec
        if time.monotonic() - silent_since > limit:
            raise SamplerError(
                f"no trajectory from any rollout worker for {limit:.0f} s "
                f"(hardware.worker_stall_timeout_sec={limit}): an env may be hanging"
            )
