"""The run's seeding scheme, in one place. From the run's `seed`:

- the learner's process (initial weights, the plan's draws): `seed_everything(seed)`;
- env `i` of rollout worker `w`: `env_seed(seed, w, i)`, and a re-created env takes a seed of
  its own (sampler/rollout_worker.py `_restart_seed`); a single-player Doom env seeds each episode that its
  reset does not seed with `episode_seed(its seed, the episode's index)` (envs/doom/env.py: a saved game is
  replayed from its episode's seed);
- learner rank `r` of a data-parallel run (hardware.devices x hardware.num_nodes > 1): every rank seeds its
  learner with the run's seed (identical initial weights), and its sampler (its envs and processes, by the
  two rules above and below) with `rank_seed(seed, r)`: rank 0 keeps the run's seed (a one-rank run is
  unchanged), every other rank a seed of its own, so no two ranks play the same episodes;
- every sampler process (rollout worker `w`, inference server `s`): torch's, numpy's and
  Python's generators from `seed_process(seed, role, index)`, so that no two processes draw
  the same numbers (a forked or spawned child otherwise starts from the same torch state as
  every other child: its workers would sample the same actions);
- the evaluation process (sf_hydra.evaluation): its generators from
  `seed_process(seed, EVALUATION, 0)` (the actions it samples with eval.deterministic=false),
  and its episode `j` of every evaluation reset with `eval_env_seed(seed, j)`: drawn from a
  stream of their own (numpy's SeedSequence, 31-bit values), apart from the training envs'
  `env_seed` (consecutive integers: a clash has odds of about 1 in 2^31 per pair), and every evaluation plays
  the same M starts: with eval.deterministic=true two evaluations differ by the weights only (sampled actions
  draw on from the generator seeded once when the process starts, so they differ from one evaluation to the next).

- population-based training (learner/pbt.py): a `random.Random(seed)` of its own, its state in
  every checkpoint;
- the opponent pool (self-play): which seat a snapshot takes is drawn by each rollout worker's
  `np.random.default_rng([seed, worker, 31337])` (sampler/rollout_worker.py), and a snapshot is
  taken every `selfplay.snapshot_every_env_steps` of a policy's own env steps (no draw);
- the learner's process state at a checkpoint: `random_states()` (torch's, numpy's and Python's
  global generators) is saved in every checkpoint and `restore_random_states` puts it back when a
  run resumes (learner/random_states.py), and in serial mode the rollout workers' envs too.

An unseeded run (`seed=null`) takes every process's seed from the OS's entropy.

What a seed fixes: with `hardware.serial_mode=true` (the workers step in the learner's process,
in a fixed order) every draw happens in the same order in every run, so two runs with one seed
give the same weights, bit for bit (`hardware.reproducible=true` checks the settings this needs,
before any process starts). In an asynchronous run the seed fixes each process's draws, but not
their interleaving: which worker's trajectories reach the learner first, and so the policy lag of
every transition (which weights acted), depends on the OS's scheduling; the batches, and from
the first update on the weights, differ between two runs with the same seed.
"""

from __future__ import annotations

import random
from typing import Optional

import numpy as np
import torch

# Which kind of process a seed is for: distinct entries of the seed sequence.
ROLLOUT_WORKER, INFERENCE_SERVER, EVALUATION, LEARNER_RANK = 1, 2, 3, 5
EVAL_EPISODES = 4  # the stream of the evaluation episodes' env seeds


def random_states() -> dict:
    """This process's global generators (torch's, numpy's, Python's) as plain values: a checkpoint loads
    them back with torch.load(weights_only=True)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(), "numpy": [str(kind), [int(k) for k in keys], int(pos), int(has_gauss),
                                                      float(cached)], "python": random.getstate()}


def restore_random_states(states: dict) -> None:
    """Puts back what `random_states` returned (a resumed run draws on as the saved one would have)."""
    torch.set_rng_state(states["torch"])
    kind, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))


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


def eval_env_seed(seed: int, episode: int) -> int:
    """The env seed of episode `episode` of every evaluation in a run seeded with `seed` (for an unseeded
    run the evaluation process draws one `seed` from the OS's entropy when it starts): a 31-bit integer
    from the EVAL_EPISODES stream, apart from every training env's `env_seed`."""
    state = np.random.SeedSequence([int(seed), EVAL_EPISODES, int(episode)]).generate_state(1, np.uint32)[0]
    return int(state >> np.uint32(1))


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
