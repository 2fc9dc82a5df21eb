"""A data-parallel run on the real Slurm cluster: `hardware.devices=2` through `hydra/launcher=slurm` is one job
of two tasks (tasks_per_node follows hardware.devices), one learner rank each, as one run."""

from __future__ import annotations

import json

import pytest
import torch


@pytest.mark.long  # ~30 s on the local cluster; kept out of CI's time budget (run with -m long)
def test_two_tasks_train_one_run(sweep):
    code = sweep.run("hardware.devices=2", "hardware.num_workers=1", "train_for_env_steps=4000", timeout=300)
    assert code == 0, sweep.output[-3000:]
    run = sweep.dir / "run"
    summary = json.loads((run / "summary.json").read_text())
    # Both ranks' frames count: 128 per rank and learner step (tests/conftest.py FAST_OVERRIDES).
    assert summary["env_steps"] >= 4000 and summary["env_steps"] == 2 * 128 * summary["policy_version"], summary
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["sf_hydra"]["env_steps"] == summary["env_steps"]
    # Two Slurm tasks (submitit's per-task logs), rank 1 logging to its own file, rank 0 alone in train.log.
    assert sorted(p.name.split("_")[1] for p in sweep.dir.glob(".submitit/*/*_log.out")) == ["0", "1"]
    assert "env steps" in (run / "ranks" / "rank_1.log").read_text()
    assert (run / "train.log").read_text().count("run folder ") == 1
