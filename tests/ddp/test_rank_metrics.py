"""What a data-parallel run logs as the run's is every rank's, not rank 0's alone (real ranks)."""

import pytest
import torch

from sf_hydra.app.train import train
from tests.conftest import make_cfg

METRICS = "tests.helpers.rank_state.WriteRankMetrics"
RUN_WIDE = ("policy_lag/", "learner/dropped_trajectories", "learner/wait_for_data_sec", "workers/")


@pytest.mark.slow
def test_every_rank_logs_the_same_run_metrics(tmp_path):
    out = tmp_path / "metrics"
    summary = train(make_cfg(tmp_path, "hardware.devices=2", "hardware.num_workers=1", "train_for_env_steps=4000",
                   f"+callbacks.rank_metrics._target_={METRICS}", f"+callbacks.rank_metrics.directory={out}"))
    rank0, rank1 = (torch.load(out / f"metrics_rank_{r}.pt", weights_only=False) for r in (0, 1))
    assert len(rank0) == len(rank1) > 3

    def run_wide(steps):
        return [{k: v for k, v in step.items() if k.startswith(RUN_WIDE)} for step in steps]

    assert any("workers/" in k for k in run_wide(rank0)[-1]) and "policy_lag/max" in run_wide(rank0)[-1]
    assert run_wide(rank0) == run_wide(rank1), "rank 0 logged its own numbers as the run's"
    # The profile is rank 0's, and says so; rank 1's is in its log.
    assert summary["profile_of"].startswith("learner rank 0")
    assert "learner rank 1: " in (tmp_path / "test" / "ranks" / "rank_1.log").read_text()
