"""Data-parallel training with real processes: `hardware.devices=2` on CPU (gloo), each rank with its own sampler
(README "Several learner processes")."""

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import compose_cfg

STATE = "tests.helpers.rank_state.WriteRankState"


def _flat(value, prefix=""):
    """{path: leaf} of nested dicts, lists and tuples."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}/{key}").items()}
    if isinstance(value, (list, tuple)):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{prefix}/{i}").items()}
    return {prefix: value}


def _same(a, b) -> list:
    """The paths where two states differ: tensors bit for bit (torch.equal), every other leaf by ==."""
    fa, fb = _flat(a), _flat(b)
    differ = sorted(set(fa) ^ set(fb))
    for key in set(fa) & set(fb):
        x, y = fa[key], fb[key]
        equal = torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
        if not equal:
            differ.append(key)
    return differ


@pytest.mark.slow
def test_two_ranks_solve_cartpole_as_one_run_with_identical_learner_state(tmp_path):
    states = tmp_path / "states"
    # Each rank's batch halved: an update then learns from 2 x 512 frames, as a one-rank default run's does from
    # 1024 (README: with the default batch, half the updates per frame; 480 was reached late or not at all).
    # Rollout 32 as before CartPole's tuned defaults: env_steps counts a worker's message (16 envs x rollout frames) as
    # it arrives, and the equality below holds when each step's 512 frames are whole messages (with 64, a message
    # outgrows the batch and env_steps runs ahead: sampler/training_batches.py)
    cfg = compose_cfg(f"train_dir={tmp_path / 'train'}", "experiment=ddp", "seed=3", "hardware.devices=2",
                      "hardware.num_workers=1", "algo.batch_size=512", "algo.rollout=32",
                      f"+callbacks.rank_state._target_={STATE}", f"+callbacks.rank_state.directory={states}")
    summary = train(cfg)
    # The default CartPole run's target (train_until_avg_return=480 over 100 episodes), within its budget.
    assert summary["stop_reason"] == "train_until_avg_return=480 reached", summary
    assert summary["avg_return"] >= 480 and summary["env_steps"] <= 500_000

    rank0, rank1 = (torch.load(states / f"rank_{r}.pt", weights_only=False) for r in (0, 1))
    assert rank0["sf_hydra"]["episode_returns"], "no episodes recorded"
    assert _same(rank0, rank1) == [], "the ranks' learner states differ"
    # One run: its env steps are both ranks' (each rank's batch is 512 frames of its own sampler per step) ...
    assert summary["env_steps"] == 2 * 512 * summary["policy_version"]
    # ... in one run folder, whose files rank 0 wrote: the checkpoint is rank 0's (= rank 1's) state.
    run = tmp_path / "train" / "ddp"
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == ["ddp"]
    assert (run / "ranks" / "rank_1.log").is_file() and (run / "summary.json").is_file()
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert _same(ckpt["state_dict"], rank1["weights"]) == []
    assert ckpt["sf_hydra"]["env_steps"] == summary["env_steps"]
    assert read_scalars(run)["perf/env_steps"][-1].value == summary["env_steps"]
