"""`hydra/launcher=local_parallel`: runs at once, each pinned to its share of the cores; one
failing run does not cost the others."""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import FAST_OVERRIDES, REPO_ROOT

pytest.importorskip("hydra_plugins.hydra_submitit_launcher",
                    reason="hydra-submitit-launcher (the `slurm` extra) is not installed")
from hydra_plugins.sf_hydra_plugins.local_parallel import core_shares, gpu_for_slot  # noqa: E402


def run_parallel(train_dir, *overrides, timeout=300):
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), "--multirun", "hydra/launcher=local_parallel",
           f"train_dir={train_dir}", "sweep_name=par", *FAST_OVERRIDES, *overrides]
    return subprocess.run(cmd, cwd=train_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def pinned_cores(sweep_dir) -> list:
    found = []
    for log_file in sorted(sweep_dir.glob(".submitit/*/*_log.*")):
        found += [m.group(1) for m in re.finditer(r"pinned to cores (\[[0-9, ]+\])", log_file.read_text())]
    return found


@pytest.mark.slow
def test_runs_in_parallel_each_on_its_own_cores(tmp_path):
    result = run_parallel(tmp_path, "seed=1,2,3", "train_for_env_steps=1500", "hydra.launcher.max_parallel=2")
    assert result.returncode == 0, result.stdout[-3000:]
    sweep = tmp_path / "multirun" / "par"
    for seed in (1, 2, 3):
        assert (sweep / f"seed={seed}" / "checkpoints" / "last.ckpt").exists()
    pins = pinned_cores(sweep)
    assert len(pins) == 3, pins
    assert "2 at a time" in result.stdout
    # The first two ran together on different shares of this machine's cores.
    if len(os.sched_getaffinity(0)) >= 2:
        assert pins[0] != pins[1]


@pytest.mark.long  # kept out of CI's 30 minutes (see pyproject.toml); run with -m long
def test_a_failing_run_does_not_stop_the_others(tmp_path):
    result = run_parallel(tmp_path, "env=gym/any", "env.id=CartPole-v1,tests.helpers.faulty_envs:CrashingCartPole-v0",
                          "env.name=cp", "train_for_env_steps=1500", "hardware.worker_stall_timeout_sec=30")
    assert result.returncode != 0
    sweep = tmp_path / "multirun" / "par"
    good = sweep / "env.id=CartPole-v1"
    assert (good / "checkpoints" / "last.ckpt").exists(), sorted(p.name for p in sweep.iterdir())
    assert "CrashingCartPole" in result.stdout


@pytest.mark.parametrize("cores, parallel, expected", [
    ([0, 1], 2, [[0], [1]]),
    ([0, 1, 2, 3, 4], 2, [[0, 1, 2], [3, 4]]),
    ([0, 1], 3, [[0], [1], [0]]),  # more runs than cores: cores are shared, never left empty
])
def test_core_shares(cores, parallel, expected):
    assert core_shares(cores, parallel) == expected


def test_gpus_are_packed_experiments_per_gpu_to_a_device():
    assert [gpu_for_slot(s, 2, 2) for s in range(6)] == [0, 0, 1, 1, 0, 0]
    assert gpu_for_slot(3, 1, 0) is None


def test_hydra_discovers_the_plugin_in_a_fresh_interpreter():
    """Hydra's plugin scan executes our plugin modules before they are in sys.modules; a
    dataclass with postponed (string) annotations then fails to resolve its module. The compose
    API, called before anything imports sf_hydra (a notebook), must still find the launcher."""
    code = ("from hydra.core.plugins import Plugins\nfrom hydra.plugins.launcher import Launcher\n"
            "print(sorted(c.__name__ for c in Plugins.instance().discover(Launcher)))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "LocalParallelLauncher" in result.stdout
