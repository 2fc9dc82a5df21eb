"""Every sampler process draws its own random numbers (sf_hydra/core/seeding.py): without that, a
forked or spawned worker starts from the same torch state as its siblings and every worker
samples the same actions."""

import numpy as np
import torch

from sf_hydra.core.seeding import INFERENCE_SERVER, ROLLOUT_WORKER, process_seed
from tests.conftest import make_cfg
from tests.sampler.collect import collect


def first_actions(got, worker: int) -> torch.Tensor:
    rows = [i for i, w in enumerate(got.workers) if w == worker]
    return got.batch["actions"][rows[0]].flatten()


def test_two_workers_sample_their_own_actions(tmp_path):
    # A fresh CartPole policy is close to 50/50: workers sharing one torch stream would agree on
    # nearly every action; independent ones agree about half the time.
    cfg = make_cfg(tmp_path, "hardware.num_workers=2", "hardware.num_envs_per_worker=4", "algo.rollout=64")
    got = collect(cfg, min_slots=16, timeout=120, from_workers=2)
    assert set(got.workers) == {0, 1}
    a, b = first_actions(got, 0), first_actions(got, 1)
    agreement = (a == b).float().mean().item()
    assert agreement < 0.8, f"workers 0 and 1 chose the same action {agreement:.0%} of the time"


def test_process_seeds_follow_the_run_seed_and_differ_between_processes():
    seeds = {process_seed(7, role, i) for role in (ROLLOUT_WORKER, INFERENCE_SERVER) for i in range(8)}
    assert len(seeds) == 16
    assert process_seed(7, ROLLOUT_WORKER, 3) == process_seed(7, ROLLOUT_WORKER, 3)
    assert process_seed(8, ROLLOUT_WORKER, 3) != process_seed(7, ROLLOUT_WORKER, 3)
    assert process_seed(None, ROLLOUT_WORKER, 3) != process_seed(None, ROLLOUT_WORKER, 3)  # unseeded: entropy
    assert all(0 <= s < 2**63 for s in seeds) and np.uint64(max(seeds))
