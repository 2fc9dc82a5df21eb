"""The learning check behind `python train.py`: CartPole reaches an average return of 450
over 100 episodes within the default budget (500k env steps). Marked slow (about a minute
or two here); it runs in CI with the rest."""

import pytest

from sf_hydra.train import train
from tests.conftest import compose_cfg


@pytest.mark.slow
def test_default_cartpole_is_solved_within_budget(tmp_path):
    cfg = compose_cfg(f"train_dir={tmp_path}", "experiment=learn", "seed=3")
    summary = train(cfg)
    assert summary["env_steps"] <= 520_000
    assert summary["avg_return"] >= 450, summary
