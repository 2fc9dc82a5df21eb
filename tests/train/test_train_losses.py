"""CartPole learns with each of the new losses and the Lamb optimizer (real trainings, short)."""

import pytest

from sf_hydra.app.train import train
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg

# Measured on 2 cores, two runs side by side: each case reaches 150 in 18k-29k env steps (median ~22k, 8-26
# seeds/repeats); the KL case once took 42k here and once passed 60k (135.1) on CI. The budget leaves room for
# that tail: a run stops as soon as it reaches 150, so the budget costs nothing when the loss learns.
BUDGET = ("train_for_env_steps=150000", "train_until_avg_return=150")


def _learns(tmp_path, *overrides):
    cfg = make_cfg(tmp_path, *BUDGET, *overrides)
    summary = train(cfg)
    assert summary["avg_return"] >= 150, summary
    assert summary["stop_reason"].startswith("train_until_avg_return"), summary
    return read_scalars(tmp_path / cfg.experiment)


@pytest.mark.slow
def test_cartpole_learns_with_vtrace(tmp_path):
    _learns(tmp_path, "algo.with_vtrace=true")


@pytest.mark.slow
def test_cartpole_learns_with_kl_penalty_and_symmetric_kl_exploration(tmp_path):
    scalars = _learns(tmp_path, "algo.kl_loss_coeff=0.1", "algo.exploration_loss=symmetric_kl")
    assert "loss/kl" in scalars and "loss/exploration" in scalars
    assert all(s.value >= 0 for s in scalars["loss/kl"])  # an exact KL is never negative
    assert any(s.value > 0 for s in scalars["loss/kl"])  # the behaviour's recorded distribution really lags


@pytest.mark.slow
def test_cartpole_learns_with_lamb(tmp_path):
    # Lamb moves each layer by lr x its own norm per step: it needs a larger lr than Adam's.
    _learns(tmp_path, "algo.optimizer_type=lamb", "algo.learning_rate=0.03")
