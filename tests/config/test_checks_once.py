"""Each stage of sf_hydra.app.checks runs once per launch: `python train.py` runs schema to run folder before
Hydra, Hydra composes the same command line again, and train() runs only the env stage; train(cfg) called
with a composed config runs every stage but the schema."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import Counter

import pytest

import sf_hydra.app.checks as checks
import sf_hydra.app.train as train_module
from sf_hydra.app.checks import BEFORE_START, check_command_line
from sf_hydra.app.topology import Topology
from tests.conftest import CONF_DIR, REPO_ROOT, compose_cfg, make_cfg

# train.py with each stage counted, and the one-rank topology's fit (sampler, learner) replaced by nothing.
LAUNCH = r"""
import atexit, collections, dataclasses, json, sys
import sf_hydra.app.checks as checks
import sf_hydra.app.train as train_module
from sf_hydra.app.cli import train_main
from sf_hydra.app.topology import Topology

calls = collections.Counter()

def counted(name, check):
    def run(*args, **kwargs):
        calls[name] += 1
        return check(*args, **kwargs)
    return run

checks.STAGES = tuple(dataclasses.replace(s, check=counted(s.name, s.check)) for s in checks.STAGES)

train_module.checked_plan = next(s for s in checks.STAGES if s.name == "env").check  # as train() runs it
Topology.fit = lambda self, *args: {"avg_return": 0.0}  # no sampler, no learner
atexit.register(lambda: print("CALLS", json.dumps(calls)))
sys.argv = ["train.py", *sys.argv[1:]]
train_main()
"""


@pytest.mark.slow
def test_train_py_runs_each_stage_once(tmp_path):
    result = subprocess.run([sys.executable, "-c", LAUNCH, f"train_dir={tmp_path}", "train_for_env_steps=1000"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    line = [x for x in result.stdout.splitlines() if x.startswith("CALLS ")][-1]
    calls = json.loads(line[len("CALLS "):])
    assert calls == {stage.name: 1 for stage in checks.STAGES}, calls


def _counting(monkeypatch) -> Counter:
    calls: Counter = Counter()

    def counted(stage):
        def run(*args):
            calls[stage.name] += 1
            return stage.check(*args)
        return dataclasses.replace(stage, check=run)

    monkeypatch.setattr(checks, "STAGES", tuple(counted(s) for s in checks.STAGES))
    return calls


def test_train_alone_runs_every_stage(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    monkeypatch.setattr(train_module, "checked_plan", next(s for s in checks.STAGES if s.name == "env").check)
    monkeypatch.setattr(Topology, "fit", lambda self, *args: {})
    train_module.train(make_cfg(tmp_path))
    assert calls == {**{name: 1 for name in BEFORE_START}, "env": 1}, calls


def test_what_passed_before_hydra_is_skipped_for_its_own_config_only(tmp_path, monkeypatch):
    argv = [f"train_dir={tmp_path}", "experiment=test", "seed=3"]
    checked = check_command_line(argv, str(CONF_DIR))
    assert checked.stages == BEFORE_START
    assert "hydra" in checked.job and "hydra" not in checked.cfg  # the job Hydra runs; the config trained
    calls = _counting(monkeypatch)
    checks.check_before_start(checked.cfg, checked)
    assert not calls  # the config it checked: nothing runs again
    assert checked.passed_for(compose_cfg(*argv)) == ()  # another config, even an equal compose
    other = compose_cfg(*argv[:-1], "seed=4")
    checks.check_before_start(other, checked)
    assert calls == {name: 1 for name in BEFORE_START}, calls


def test_train_py_composes_the_command_line_once(tmp_path):
    """Hydra runs the job on the checks' compose: Hydra's own compose (Hydra.compose_config) never runs."""
    launch = LAUNCH.replace("checks.STAGES = ", """from hydra._internal.hydra import Hydra
Hydra.compose_config = counted("hydra compose", Hydra.compose_config)
import sf_hydra.app.bad_input as bad_input
bad_input.compose = counted("compose", bad_input.compose)
checks.STAGES = """)
    result = subprocess.run([sys.executable, "-c", launch, f"train_dir={tmp_path}", "train_for_env_steps=1000"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    calls = json.loads([x for x in result.stdout.splitlines() if x.startswith("CALLS ")][-1][len("CALLS "):])
    assert calls["compose"] == 1 and calls["hydra compose"] == 1, calls  # the compose API's call is Hydra's one
    assert (tmp_path / "cartpole" / ".hydra" / "config.yaml").is_file()  # Hydra wrote the job's folder
