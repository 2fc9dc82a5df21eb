"""The run's seeding scheme, in one place. From the run's `seed`:

- the learner's process (initial weights, the plan's draws): `seed_everything(seed)`;
- env `i` of rollout worker `w`: `env_seed(seed, w, i)`, and a re-created env takes a seed of
  its own (sampler/rollout_worker.py `_restart_seed`);
- learner rank `r` of a data-parallel run (hardware.devices x hardware.num_nodes > 1): every rank seeds its
  learner with the run's seed (identical initial weights), and its sampler (its envs and processes, by the
  two rules above and below) with `rank_seed(seed, r)`: rank 0 keeps the run's seed (a one-rank run is
  unchanged), every other rank a seed of its own, so no two ranks play the same episodes;
- every sampler process (rollout worker `w`, inference server `s`): torch's, numpy's and
  Python's generators from `seed_process(seed, role, index)`, so that no two processes draw
  the same numbers (a forked or spawned child otherwise starts from the same torch state as
  every other child: its workers would sample the same actions).

An unseeded run (`seed=null`) takes every process's seed from the OS's entropy.
"""

from __future__ import annotations

import random
from typing import Optional

import numpy as np
import torch

# Which kind of process a seed is for: distinct entries of the seed sequence.
ROLLOUT_WORKER, INFERENCE_SERVER, LEARNER_RANK = 1, 2, 3


def seed_everything(seed: Optional[int]) -> None:
    """Python's, numpy's and torch's global random state from the run's seed (None: left as it is)."""
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)


def env_seed(seed: Optional[int], worker_id: int, env_index: int) -> Optional[int]:
    """The seed of env `env_index` of worker `worker_id` in a run seeded with `seed` (None: unseeded)."""
    if seed is None:
        return None
    return int(seed) * 100_003 + worker_id * 1_009 + env_index


def process_seed(seed: Optional[int], role: int, index: int) -> int:
    """The seed of sampler process `index` of kind `role` (ROLLOUT_WORKER, INFERENCE_SERVER):
    a function of the three for a seeded run, fresh entropy for an unseeded one. Distinct
    (role, index) pairs give independent streams (numpy's SeedSequence)."""
    entropy = None if seed is None else [int(seed), role, index]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> np.uint64(1))


def seed_process(seed: Optional[int], role: int, index: int) -> int:
    """Seeds this process's torch, numpy and Python generators with `process_seed`; returns it."""
    value = process_seed(seed, role, index)
    random.seed(value)
    np.random.seed(value % 2**32)
    torch.manual_seed(value)
    return value


def rank_seed(seed: Optional[int], rank: int) -> Optional[int]:
    """The seed of learner rank `rank`'s sampler in a run seeded with `seed`: the run's seed on rank 0,
    a distinct one (numpy's SeedSequence of (seed, LEARNER_RANK, rank), below 2**31) on every other rank;
    None (unseeded) stays None."""
    if seed is None or rank == 0:
        return seed
    return int(np.random.SeedSequence([int(seed), LEARNER_RANK, rank]).generate_state(1)[0] >> 1)
