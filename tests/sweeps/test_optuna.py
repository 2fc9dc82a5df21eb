"""`hydra/sweeper=optuna`: trials are real runs, the study is kept in sqlite in the sweep's
folder, it maximises the runs' final average return, and a re-run continues the study."""

import subprocess
import sys

import pytest
import yaml

from tests.conftest import FAST_OVERRIDES, REPO_ROOT

optuna = pytest.importorskip("optuna", reason="the `optuna` extra (hydra-optuna-sweeper) is not installed")


def run_study(train_dir, trials: int):
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), "--multirun", "hydra/sweeper=optuna",
           f"hydra.sweeper.n_trials={trials}", "hydra.sweeper.sampler.seed=0", f"train_dir={train_dir}",
           "sweep_name=study", *FAST_OVERRIDES, "train_for_env_steps=1500"]
    return subprocess.run(cmd, cwd=train_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


@pytest.mark.slow
def test_optuna_study_maximises_the_return_and_continues(tmp_path):
    first = run_study(tmp_path, 2)
    assert first.returncode == 0, first.stdout[-3000:]
    assert "alembic" not in first.stdout  # the sweeper's imports stay quiet
    sweep = tmp_path / "multirun" / "study"
    db = sweep / "optuna.db"
    study = optuna.load_study(study_name="study", storage=f"sqlite:///{db}")
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    assert len(study.trials) == 2
    runs = sorted(p for p in sweep.iterdir() if (p / "summary.json").exists())
    assert len(runs) == 2
    returns = sorted(yaml.safe_load((r / "summary.json").read_text())["avg_return"] for r in runs)
    assert sorted(t.value for t in study.trials) == pytest.approx(returns)
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert best["best_value"] == pytest.approx(max(returns))
    assert set(best["best_params"]) == {"algo.learning_rate", "algo.exploration_loss_coeff"}

    second = run_study(tmp_path, 1)
    assert second.returncode == 0, second.stdout[-3000:]
    assert len(optuna.load_study(study_name="study", storage=f"sqlite:///{db}").trials) == 3
