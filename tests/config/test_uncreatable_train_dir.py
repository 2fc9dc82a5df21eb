"""A train_dir that cannot be created (a folder on /proc or /sys, where even root makes none) is a bad config:
refused by train.py with the key, the path and why, exit 2, before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sf_hydra.core.faults import EXIT_BAD_CONFIG
from tests.faults.runs import REPO, env_with_repo


def _train_py(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "train.py"), *args], cwd=REPO, env=env_with_repo(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)


@pytest.mark.parametrize("root", ["/proc", "/sys"])
@pytest.mark.parametrize("flags", [(), ("--multirun", "seed=1,2")], ids=["run", "multirun"])
def test_a_train_dir_on_a_file_system_without_folders_is_refused_by_name(root, flags):
    if not Path(root).is_dir() or not Path("/proc/self/mounts").is_file():
        pytest.skip(f"no {root} file system on this platform")
    train_dir = f"{root}/sf_runs"
    proc = _train_py(*flags, f"train_dir={train_dir}", "train_for_env_steps=1000")
    assert proc.returncode == EXIT_BAD_CONFIG, proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout, proc.stdout[-3000:]
    assert f"bad config: train_dir='{train_dir}' is not allowed: a folder that can be created: {root} takes no " \
           "new folder" in proc.stdout, proc.stdout
    assert f"mounted at {root}" in proc.stdout  # why: the file system it is on
    assert "building env" not in proc.stdout  # refused before anything starts
    assert not Path(train_dir).exists()
