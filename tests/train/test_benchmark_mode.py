"""`python train.py benchmark=true`: the sampler's ceiling (workers sample, trajectories are
counted and dropped, nothing learned or saved); and, on real runs, the env info cache at
start-up and the summaries' x-axis (logger.summaries_use_frameskip)."""

import json
import logging
import os
import re

import pytest

from sf_hydra.app.train import train
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg
from tests.faults.runs import train_py
from tests.helpers.probe_envs import read_log


@pytest.mark.slow
def test_benchmark_samples_without_learning(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="sf_hydra")
    cfg = make_cfg(tmp_path, "benchmark=true", "train_for_env_steps=6000", "hardware.num_workers=1")
    summary = train(cfg)
    run = tmp_path / "test"
    assert json.loads((run / "summary.json").read_text()) == summary
    assert summary["env_steps"] >= 6000 and summary["fps"] > 0 and summary["episodes"] > 0
    assert summary["policy_version"] == 0  # no optimizer step: the workers act with the initial weights
    assert any(r.getMessage().startswith("benchmark stopped (train_for_env_steps=6000 reached)") and
               f"FPS {summary['fps']:.0f}" in r.getMessage() for r in caplog.records)
    assert not list(run.rglob("*.ckpt")), "a benchmark saves no checkpoint"
    scalars = read_scalars(run)
    assert scalars["perf/fps"] and scalars["perf/env_steps"][-1].value == summary["env_steps"]
    assert "loss/policy" not in scalars  # nothing was trained


@pytest.mark.long  # the in-process test above runs in CI; this one adds train.py's own path
def test_train_py_benchmark_true(tmp_path):
    proc = train_py(tmp_path, "benchmark=true", "train_for_env_steps=6000")
    assert proc.returncode == 0, proc.out
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= 6000 and summary["fps"] > 0 and summary["episodes"] > 0
    assert summary["policy_version"] == 0  # no optimizer step: the workers act with the initial weights
    line = re.search(r"benchmark stopped \(train_for_env_steps=6000 reached\): (\d+) env steps .* FPS (\d+)", proc.out)
    assert line and int(line.group(1)) == summary["env_steps"] and int(line.group(2)) > 0, proc.out
    assert not list(run.rglob("*.ckpt")), "a benchmark saves no checkpoint"
    scalars = read_scalars(run)
    assert scalars["perf/fps"] and scalars["perf/env_steps"][-1].value == summary["env_steps"]
    assert "loss/policy" not in scalars  # nothing was trained


@pytest.mark.slow
def test_env_info_cache_and_summaries_in_agent_steps(tmp_path):
    probe = ("env=gym/any", "env.id=tests.helpers.probe_envs:ProbeCartPole-v0", f"+env.kwargs.log_dir={tmp_path}",
             "env.frameskip=2", "hardware.use_env_info_cache=true", "train_for_env_steps=4000",
             "hardware.num_workers=1")
    built_here = lambda: sum(e["event"] == "built" and e["pid"] == os.getpid() for e in read_log(tmp_path))  # noqa: E731
    first = train(make_cfg(tmp_path, *probe, "experiment=frames"))
    assert built_here() == 1  # the learner's probe env, whose spaces are now cached
    second = train(make_cfg(tmp_path, *probe, "experiment=agent_steps", "logger.summaries_use_frameskip=false"))
    assert built_here() == 1, "the second start built an env in the learner"
    frames = read_scalars(tmp_path / "frames")["perf/env_steps"]
    agent_steps = read_scalars(tmp_path / "agent_steps")["perf/env_steps"]
    assert frames[-1].step == first["env_steps"] == frames[-1].value  # x-axis: frames (env steps x frameskip)
    assert agent_steps[-1].step == second["env_steps"] // 2 and agent_steps[-1].value == second["env_steps"]
