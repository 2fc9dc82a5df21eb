"""`env=gym/any` has a budget like the other gym envs (it ends, and its ETA shows), which a Sample Factory
line that maps to it names in its note, as for any env config's budget."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.faults.runs import REPO, env_with_repo


def _train_py(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "train.py"), *args, "--cfg", "job"], cwd=REPO,
                          env=env_with_repo(), capture_output=True, text=True, timeout=120)


def test_gym_any_has_a_budget_like_the_other_gym_envs():
    budgets = {}
    for env in ("gym/any env.id=MountainCar-v0", "gym/cartpole", "gym/acrobot", "gym/lunar_lander"):
        proc = _train_py(f"env={env.split()[0]}", *env.split()[1:])
        assert proc.returncode == 0, proc.stderr[-2000:]
        budgets[env] = yaml.safe_load(proc.stdout)["train_for_env_steps"]
    assert budgets["gym/any env.id=MountainCar-v0"] == 1_000_000
    assert budgets["gym/any env.id=MountainCar-v0"] <= max(budgets.values())


def test_a_sample_factory_line_for_any_gym_id_names_the_budget():
    proc = _train_py("--env=MountainCar-v0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "env=gym/any env.id=MountainCar-v0" in proc.stderr
    assert "note: train_for_env_steps=1000000: env MountainCar-v0's budget" in proc.stderr, proc.stderr
