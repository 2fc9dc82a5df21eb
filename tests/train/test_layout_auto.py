"""hardware.layout=auto end to end: `python train.py env=gym/cartpole hardware.layout=auto` probes within its
budget, prints the one line of its pick, saves the concrete layout in config.yaml, keeps a typed layout key, and a
resume keeps the saved layout without probing again."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from tests.faults.runs import REPO, env_with_repo

PICKED = re.compile(r"hardware\.layout=auto: picked num_workers=(\d+), num_envs_per_worker=(\d+), "
                    r"worker_num_splits=(\d+), inference=(\w+) \(why: measured .*; probe ([0-9.]+) s\)")
BUDGET = 20  # hardware.layout_probe_sec of this test (the lowest allowed is 10)


def _train_py(tmp_path, *overrides: str) -> str:
    """`python train.py` in `tmp_path/run`, none of the layout keys typed but those in `overrides`; its output."""
    cmd = [sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=run", "logger.progress=lines",
           "logger.log_interval_sec=1", *overrides]
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                          env=env_with_repo())
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


def _hardware(run_dir) -> dict:
    return yaml.safe_load((run_dir / "config.yaml").read_text())["hardware"]


@pytest.mark.slow
def test_layout_auto_probes_saves_its_pick_and_a_resume_keeps_it(tmp_path):
    typed = ("env=gym/cartpole", "hardware.layout=auto", f"hardware.layout_probe_sec={BUDGET}",
             "hardware.worker_num_splits=2", "train_until_avg_return=null")
    first = _train_py(tmp_path, *typed, "train_for_env_steps=20000")
    lines = [line for line in first.splitlines() if "hardware.layout=auto: picked" in line]
    assert len(lines) == 1, first[-4000:]
    workers, envs, splits, inference, seconds = PICKED.search(lines[0]).groups()
    assert float(seconds) <= BUDGET + 10  # the last sampler run may start just before the budget ends
    assert int(splits) == 2  # typed on the command line: kept
    hw = _hardware(tmp_path / "run")
    assert (hw["num_workers"], hw["num_envs_per_worker"], hw["worker_num_splits"], hw["inference"]) == \
        (int(workers), int(envs), 2, inference)
    assert hw["layout"] == "auto"

    again = _train_py(tmp_path, *typed, "train_for_env_steps=40000")
    assert "hardware.layout=auto: picked" not in again
    assert "hardware.layout=auto: resuming with the layout picked at the run's start" in again, again[-4000:]
    assert "resuming from" in again
    assert _hardware(tmp_path / "run") == hw
