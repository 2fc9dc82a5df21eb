"""A failing evaluation ends the evaluation, never the training: the evaluation env crashes in its own
process (a real simulator error), the run logs one error naming it and trains to its budget, with its
checkpoint."""

import logging

import pytest

from sf_hydra.app.train import train
from tests.conftest import make_cfg


@pytest.mark.slow
def test_a_crashing_evaluation_env_stops_evaluating_not_training(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="sf_hydra")
    summary = train(make_cfg(tmp_path, "env=gym/any", "env.id=CartPole-v1", "train_for_env_steps=15000",
                             "train_until_avg_return=null", "eval.every_env_steps=5000", "eval.episodes=4",
                             "+eval.env_overrides.id=tests.helpers.faulty_envs:CrashingCartPole-v0",
                             "+eval.env_overrides.kwargs.crash_after=5"))
    run = tmp_path / "test"
    assert summary["env_steps"] >= 15000  # the budget, not a stop at the first evaluation
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    off = [m for m in errors if "evaluation during training is off" in m]
    assert len(off) == 1, errors  # one error, then no more requests
    assert "boom: the simulator crashed" in off[0]  # the env's own error reaches the log
    assert not (run / "eval" / "evaluations.jsonl").exists() or \
        (run / "eval" / "evaluations.jsonl").read_text().strip() == ""
    assert (run / "checkpoints" / "last.ckpt").exists()
