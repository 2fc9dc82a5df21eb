"""`python train.py --multirun`: one folder per sweep, one subfolder per run named by what
varies, and re-running the same sweep resumes (or leaves alone) each run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sf_hydra.config.sweep_folders import job_dirname, safe_name, sweep_overrides, with_overrides
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import FAST_OVERRIDES, REPO_ROOT


def run_sweep(train_dir: Path, *overrides: str, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), "--multirun", f"train_dir={train_dir}", *FAST_OVERRIDES,
           *overrides]
    # Hydra logs to stdout in --multirun: read both streams as one.
    return subprocess.run(cmd, cwd=train_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def summaries(sweep_dir: Path) -> dict:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/summary.json"))}


@pytest.mark.slow
def test_sweep_layout_and_resume(tmp_path):
    first = run_sweep(tmp_path, "seed=1,2", "train_for_env_steps=2000")
    assert first.returncode == 0, first.stdout[-3000:]
    sweeps = list((tmp_path / "multirun").iterdir())
    assert len(sweeps) == 1, sweeps
    sweep = sweeps[0]
    assert sweep.name.startswith("seed=1,2__")
    runs = summaries(sweep)
    assert sorted(runs) == ["seed=1", "seed=2"]
    for name, summary in runs.items():
        assert summary["env_steps"] >= 2000
        assert (sweep / name / "checkpoints" / "last.ckpt").exists()
        assert read_scalars(sweep / name)["perf/env_steps"], f"{name} wrote no TensorBoard scalars"

    # Same command: every run already used its budget and is left alone.
    again = run_sweep(tmp_path, "seed=1,2", "train_for_env_steps=2000")
    assert again.returncode == 0, again.stdout[-3000:]
    assert summaries(sweep) == runs
    assert again.stdout.count("nothing to do") == 2, again.stdout[-3000:]

    # A larger budget is the same sweep: each run resumes from its own step counter.
    more = run_sweep(tmp_path, "seed=1,2", "train_for_env_steps=4000")
    assert more.returncode == 0, more.stdout[-3000:]
    assert list((tmp_path / "multirun").iterdir()) == [sweep]
    assert more.stdout.count("resuming from last.ckpt") == 2, more.stdout[-3000:]
    resumed = summaries(sweep)
    for name in runs:
        assert resumed[name]["env_steps"] >= 4000
        assert resumed[name]["policy_version"] > runs[name]["policy_version"]


def test_sweep_name_comes_from_the_command_line():
    extra = sweep_overrides(["--multirun", "seed=0,1", "env=doom/basic", "train_dir=/x", "hydra/launcher=slurm"])
    assert extra[0] == "sweep_name='seed=0,1__env=doom-basic'"
    # Keys equal in every run (and placement keys) are left out of each run's folder name.
    assert extra[1].startswith("hydra.job.config.override_dirname.exclude_keys=[")
    excluded = extra[1].split("=[", 1)[1].rstrip("]").split(",")
    assert "env" in excluded and "train_dir" in excluded and "seed" not in excluded


def test_budget_is_not_part_of_the_sweep_name_unless_swept():
    fixed = sweep_overrides(["seed=0,1", "train_for_env_steps=1000"])[0]
    longer = sweep_overrides(["seed=0,1", "train_for_env_steps=9000"])[0]
    assert fixed == longer
    swept = sweep_overrides(["train_for_env_steps=1000,2000"])[0]
    assert "train_for_env_steps" in swept


def test_experiment_comes_right_after_what_varies():
    name = sweep_overrides(["+experiments=doom_basic_envs", "algo.gamma=0.9", "seed=0,1"])[0]
    assert name == "sweep_name='seed=0,1__experiments=doom_basic_envs__algo.gamma=0.9'"


def test_hydra_options_are_not_overrides():
    extra = sweep_overrides(["--multirun", "seed=0,1", "--cfg", "hydra", "--resolve"])
    assert extra[0] == "sweep_name='seed=0,1'"


@pytest.mark.parametrize("argv, expected", [
    (["-m", "a=1", "--cfg", "hydra"], ["-m", "a=1", "X", "--cfg", "hydra"]),
    (["-m", "--cfg", "hydra"], ["-m", "--cfg", "hydra", "X"]),
    (["a=1", "-m"], ["a=1", "X", "-m"]),
])
def test_extra_overrides_join_the_users_own(argv, expected):
    assert with_overrides(argv, ["X"]) == expected


def test_explicit_sweep_name_is_kept():
    extra = sweep_overrides(["seed=0,1", "sweep_name=mine"])
    assert not any(e.startswith("sweep_name=") for e in extra)


@pytest.mark.parametrize("text, expected", [("env=doom/basic,seed=0", "env=doom-basic,seed=0"), ("", "run")])
def test_job_dirname(text, expected):
    assert job_dirname(text) == expected


def test_long_names_are_cut_with_a_hash():
    long = "x" * 300
    name = safe_name(long)
    assert len(name) <= 80 and name != safe_name("x" * 299)
