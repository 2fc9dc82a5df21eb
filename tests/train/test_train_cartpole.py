"""Short real trainings on CartPole: process and serial mode, sync mode, resume,
restart/overwrite, and what lands in the run folder."""

import json

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg

REQUIRED_SCALARS = {
    "perf/fps", "perf/env_steps", "episode/return", "episode/length", "loss/policy", "loss/value", "loss/entropy",
    "learner/kl", "learner/clip_fraction", "learner/grad_norm", "learner/lr", "policy_lag/min", "policy_lag/avg",
    "policy_lag/max", "learner/wait_for_data_sec",
}


def _run_dir(cfg):
    from pathlib import Path

    return Path(cfg.train_dir) / cfg.experiment


@pytest.mark.slow
@pytest.mark.parametrize("serial", [False, True], ids=["processes", "serial"])
def test_cartpole_trains_and_writes_run_folder(tmp_path, serial):
    cfg = make_cfg(tmp_path, f"hardware.serial_mode={serial}", "train_for_env_steps=20000")
    summary = train(cfg)
    run = _run_dir(cfg)
    assert summary["env_steps"] >= 20000
    assert summary["episodes"] > 0 and summary["avg_return"] > 0
    assert summary["stop_reason"].startswith("train_for_env_steps")
    assert json.loads((run / "summary.json").read_text())["env_steps"] == summary["env_steps"]
    assert "CartPole-v1" in (run / "config.yaml").read_text()
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["sf_hydra"]["env_steps"] == summary["env_steps"]
    assert ckpt["sf_hydra"]["policy_version"] == summary["policy_version"] > 0
    scalars = read_scalars(run)
    assert REQUIRED_SCALARS <= set(scalars), REQUIRED_SCALARS - set(scalars)
    assert scalars["perf/env_steps"][-1].value == summary["env_steps"]
    assert all(s.value > 0 for s in scalars["perf/fps"][1:])


@pytest.mark.slow
def test_sync_ppo_has_no_policy_lag(tmp_path):
    # One round (2 workers x 4 envs x 16 steps = 128) is exactly one iteration (128 x 1).
    cfg = make_cfg(tmp_path, "algo=ppo", "train_for_env_steps=6000")
    summary = train(cfg)
    scalars = read_scalars(_run_dir(cfg))
    assert summary["env_steps"] >= 6000
    assert max(s.value for s in scalars["policy_lag/max"]) == 0.0


@pytest.mark.slow
def test_resume_continues_counters(tmp_path):
    first = train(make_cfg(tmp_path, "train_for_env_steps=8000"))
    second = train(make_cfg(tmp_path, "train_for_env_steps=16000"))
    assert second["env_steps"] >= 16000
    assert second["policy_version"] > first["policy_version"]
    # The resumed run only had to collect the difference.
    assert second["env_steps"] - first["env_steps"] < 16000


@pytest.mark.slow
@pytest.mark.parametrize("behavior", ["restart", "overwrite"])
def test_restart_behaviors_start_from_zero(tmp_path, behavior):
    first = train(make_cfg(tmp_path, "train_for_env_steps=6000"))
    second = train(make_cfg(tmp_path, "train_for_env_steps=6000", f"restart_behavior={behavior}"))
    assert 6000 <= second["env_steps"] < first["env_steps"] + 6000
    assert second["policy_version"] <= first["policy_version"] + 1
    old_runs = [p for p in tmp_path.iterdir() if p.name.startswith("test_old_")]
    assert len(old_runs) == (1 if behavior == "restart" else 0)
    if behavior == "restart":
        assert (old_runs[0] / "checkpoints" / "last.ckpt").exists()


@pytest.mark.slow
def test_keep_checkpoints_prunes_old_ones(tmp_path):
    cfg = make_cfg(tmp_path, "train_for_env_steps=30000", "save_every_sec=0.3", "keep_checkpoints=2")
    train(cfg)
    numbered = sorted((_run_dir(cfg) / "checkpoints").glob("checkpoint_*.ckpt"))
    assert 1 <= len(numbered) <= 2
    assert (_run_dir(cfg) / "checkpoints" / "last.ckpt").exists()


@pytest.mark.slow
def test_experience_older_than_max_policy_lag_is_dropped(tmp_path):
    # A slow learner (many epochs) and a deep queue make experience go stale.
    cfg = make_cfg(tmp_path, "algo.num_epochs=8", "algo.num_batches_to_accumulate=4", "algo.max_policy_lag=1",
                   "train_for_env_steps=15000")
    train(cfg)
    scalars = read_scalars(_run_dir(cfg))
    assert scalars["learner/dropped_trajectories_total"][-1].value > 0
    assert max(s.value for s in scalars["policy_lag/max"]) <= 1.0
