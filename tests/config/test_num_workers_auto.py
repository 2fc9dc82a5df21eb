"""`hardware.num_workers=auto`: one rollout worker per core the run may use (its CPU affinity)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.conftest import compose_cfg
from tests.faults.runs import REPO, env_with_repo


def _resolved_num_workers(cores, *overrides) -> int:
    proc = subprocess.run([sys.executable, str(REPO / "train.py"), *overrides, "--cfg", "job", "--resolve"], cwd=REPO,
                          env=env_with_repo(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                          preexec_fn=lambda: os.sched_setaffinity(0, cores))
    assert proc.returncode == 0, proc.stdout[-3000:]
    return yaml.safe_load(proc.stdout)["hardware"]["num_workers"]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_auto_is_the_cores_the_run_may_use():
    cores = sorted(os.sched_getaffinity(0))
    assert _resolved_num_workers({cores[0]}, "hardware.num_workers=auto") == 1
    assert _resolved_num_workers(set(cores), "hardware.num_workers=auto") == len(cores)
    assert _resolved_num_workers(set(cores), "hardware.num_workers=3") == 3


def test_auto_shares_the_cores_among_local_ranks(monkeypatch):
    """With hardware.devices=2 learner ranks started on this machine, each rank gets half of the cores."""
    for name in ("SLURM_NTASKS", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert compose_cfg("hardware.num_workers=auto", "hardware.devices=2").hardware.num_workers == 4
    assert compose_cfg("hardware=gpu", "hardware.devices=4").hardware.num_workers == 2
    # A task of a Slurm job step of several tasks is one rank, its allocation its own.
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert compose_cfg("hardware.num_workers=auto", "hardware.devices=2").hardware.num_workers == 8
