"""Small real runs of train.py for the fault tests: CartPole, one worker, a few thousand env steps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.rollout=16", "algo.batch_size=32",
        "algo.num_batches_per_epoch=1", "train_for_env_steps=2000", "logger.log_interval_sec=1")


def env_with_repo() -> dict:
    """The environment for a child python: the repo root importable (tests.helpers.faulty_envs)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), str(REPO / "src"), env.get("PYTHONPATH")) if p)
    return env


def train_py(tmp_path, *overrides: str, flags=(), timeout: float = 120, **popen) -> subprocess.CompletedProcess:
    """`python train.py FLAGS train_dir=<tmp_path> experiment=run TINY... overrides...`, run to its end (flags such
    as --multirun go first). Its stdout and stderr together (Hydra logs to stdout) are in `.out`."""
    cmd = [sys.executable, str(REPO / "train.py"), *flags, f"train_dir={tmp_path}", "experiment=run", *TINY, *overrides]
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env=env_with_repo(), **popen)
    proc.out = proc.stdout
    return proc
