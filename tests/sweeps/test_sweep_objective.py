"""`sweep_objective`: what train.py returns to a sweeper. The score from a run's summary
(sf_hydra.app.objective.sweep_score), and a real Optuna trial of a CartPole run that stops at a low target."""

import math
import subprocess
import sys

import pytest
import yaml

from sf_hydra.app.objective import UNREACHED_SECONDS, sweep_score
from tests.conftest import FAST_OVERRIDES, REPO_ROOT


def summary(seconds, avg_return, stop_reason):
    return {"train_seconds": seconds, "avg_return": avg_return, "stop_reason": stop_reason, "env_steps": 1000}


REACHED = "train_until_avg_return=450 reached"
BUDGET = "train_for_env_steps=500000 reached"


def test_avg_return_is_the_final_average_return():
    assert sweep_score(summary(12.0, 431.5, BUDGET), "avg_return", None) == 431.5
    assert sweep_score(summary(12.0, 431.5, BUDGET), "avg_return", 450.0) == 431.5


def test_time_to_target_is_minus_the_seconds_when_the_target_stopped_the_run():
    assert sweep_score(summary(12.5, 452.0, REACHED), "time_to_target", 450.0) == -12.5
    assert sweep_score(summary(9.0, 451.0, REACHED), "time_to_target", 450.0) > \
        sweep_score(summary(12.5, 452.0, REACHED), "time_to_target", 450.0)
    by_evaluation = "train_until_avg_return=450 reached by evaluation (policy 0: 470.0)"
    assert sweep_score(summary(7.0, 440.0, by_evaluation), "time_to_target", 450.0) == -7.0


def test_a_run_that_missed_the_target_scores_below_every_run_that_reached_it():
    slow_reached = sweep_score(summary(UNREACHED_SECONDS - 1, 450.0, REACHED), "time_to_target", 450.0)
    fast_missed = sweep_score(summary(1.0, 449.9, BUDGET), "time_to_target", 450.0)
    assert fast_missed < slow_reached
    # Missed: -(seconds + 1e6 x (1 + shortfall)), shortfall a fraction of the target.
    assert sweep_score(summary(20.0, 360.0, BUDGET), "time_to_target", 450.0) == \
        pytest.approx(-(20.0 + UNREACHED_SECONDS * 1.2))
    # A window at the target that another budget stopped first (or a signal) missed it too, by nothing.
    assert sweep_score(summary(20.0, 470.0, "signal SIGTERM"), "time_to_target", 450.0) == \
        -(20.0 + UNREACHED_SECONDS)


@pytest.mark.parametrize("target", [450.0, 0.0, -200.0])
def test_missed_scores_rise_with_the_return_and_fall_with_the_seconds(target):
    returns = [target - d for d in (1000.0, 100.0, 10.0, 1.0, 0.0)]
    scores = [sweep_score(summary(30.0, r, BUDGET), "time_to_target", target) for r in returns]
    assert scores == sorted(scores) and len(set(scores)) == len(scores)
    assert sweep_score(summary(40.0, target - 5, BUDGET), "time_to_target", target) < \
        sweep_score(summary(30.0, target - 5, BUDGET), "time_to_target", target)


def test_no_episode_ended_is_minus_infinity():
    for objective in ("avg_return", "time_to_target"):
        assert sweep_score(summary(3.0, None, BUDGET), objective, 450.0) == -math.inf
        assert sweep_score(summary(3.0, math.nan, BUDGET), objective, 450.0) == -math.inf
    # A rank > 0 that found the run finished returns this much of a summary.
    assert sweep_score({"rank": 1, "stop_reason": None, "finished": "..."}, "time_to_target", 450.0) == -math.inf


@pytest.mark.slow
def test_an_optuna_trial_scores_minus_the_seconds_to_a_low_target(tmp_path):
    optuna = pytest.importorskip("optuna", reason="the `optuna` extra (hydra-optuna-sweeper) is not installed")
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), "--multirun", "hydra/sweeper=optuna",
           "hydra.sweeper.n_trials=1", "hydra.sweeper.sampler.seed=0", f"train_dir={tmp_path}", "sweep_name=study",
           *FAST_OVERRIDES, "sweep_objective=time_to_target", "train_until_avg_return=20", "train_for_env_steps=200000"]
    done = subprocess.run(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    sweep = tmp_path / "multirun" / "study"
    (run,) = [p for p in sweep.iterdir() if (p / "summary.json").exists()]
    result = yaml.safe_load((run / "summary.json").read_text())
    assert result["stop_reason"].startswith("train_until_avg_return=20 reached")
    (trial,) = optuna.load_study(study_name="study", storage=f"sqlite:///{sweep / 'optuna.db'}").trials
    assert trial.value == pytest.approx(-result["train_seconds"]) and -60 < trial.value < 0


def test_time_to_target_without_a_target_is_refused_before_anything_starts(tmp_path):
    done = subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), f"train_dir={tmp_path}",
                           "sweep_objective=time_to_target", "train_until_avg_return=null"],
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert done.returncode == 2, done.stdout[-3000:]
    assert "sweep_objective='time_to_target' is not allowed" in done.stdout
    assert not any(tmp_path.iterdir())
