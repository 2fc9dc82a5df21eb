"""`hardware.num_workers=auto`: one rollout worker per core the run may use (its CPU affinity)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

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
