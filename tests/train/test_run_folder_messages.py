"""What train.py says about a run folder that already holds a run: a value that is invalid is refused as invalid
whatever the folder holds; a resume says what it continues (how far, how old, which command made it); and the
stop line's return is rounded. One small CartPole run (tests/faults/runs.py's TINY) is trained for the module."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from sf_hydra.core.faults import EXIT_BAD_CONFIG
from tests.faults.runs import REPO, TINY, env_with_repo, train_py


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """(train_dir, output) of a run trained to its budget (2000 env steps) in <train_dir>/run."""
    train_dir = tmp_path_factory.mktemp("finished")
    proc = train_py(train_dir)
    assert proc.returncode == 0, proc.out[-3000:]
    return train_dir, proc.out


@pytest.mark.parametrize("override, allowed", [
    ("hardware.num_envs_per_worker=-4", "an integer >= 1"),  # a key a resume may change: was "finished"
    ("algo.gamma=1.5", "a number in [0, 1]"),  # a key a resume may not change: was "0.99, as saved"
])
def test_an_invalid_value_is_refused_as_invalid_on_an_existing_run(finished_run, override, allowed):
    train_dir, _ = finished_run
    before = sorted(p.name for p in (train_dir / "run").iterdir())
    proc = train_py(train_dir, override)
    key, value = override.split("=")
    assert proc.returncode == EXIT_BAD_CONFIG, proc.out[-3000:]
    assert f"bad config: {key}={value} is not allowed: {allowed}" in proc.out, proc.out
    assert "nothing to do" not in proc.out and "as saved" not in proc.out
    assert sorted(p.name for p in (train_dir / "run").iterdir()) == before  # nothing written


def test_the_stop_line_rounds_the_return(finished_run):
    _, out = finished_run
    stop = next(line for line in out.splitlines() if "stopped (" in line)
    assert re.search(r"avg return (-?\d+\.\d{2}|n/a), checkpoint ", stop), stop


def test_a_sample_factory_line_that_resumes_another_commands_run_says_which(finished_run, tmp_path):
    """`--experiment` names the folder the module's train.py line made: the translated line says it resumes it,
    with its env steps, its checkpoint's age and that line, before it trains on."""
    source, _ = finished_run
    shutil.copytree(source / "run", tmp_path / "run")  # this test trains on: the other tests keep theirs
    sf_line = ["--env=CartPole-v1", "--experiment=run", f"--train_dir={tmp_path}", "--num_workers=1",
               "--num_envs_per_worker=2", "--rollout=16", "--batch_size=32", "--num_batches_per_epoch=1",
               "--train_for_env_steps=3000"]
    proc = _train_py_line(sf_line)
    assert proc.returncode == 0, proc.stdout[-3000:]
    said = next((line for line in proc.stdout.splitlines() if line.startswith("resuming the run in")), None)
    assert said is not None, proc.stdout[-3000:]
    steps = max(int(p.stem.split("_")[1]) for p in (source / "run" / "checkpoints").glob("checkpoint_*.ckpt"))
    assert f"resuming the run in {tmp_path / 'run'}: {steps} env steps (its newest checkpoint, written " in said
    assert re.search(r"written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, \d+ (s|min) ago\)", said), said
    assert f"its last session ran: python train.py train_dir={source} experiment=run {' '.join(TINY)}" in said
    assert "restart_behavior=restart" in said  # how to start anew instead


def _train_py_line(args):
    """train.py with exactly `args` (none of train_py's overrides: a Sample Factory line of flags only)."""
    return subprocess.run([sys.executable, str(REPO / "train.py"), *args], cwd=REPO, env=env_with_repo(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_more_workers_than_cores_says_what_auto_would_pick(tmp_path):
    """Two rollout workers on the one core the run may use: one warning line at start, naming auto's pick."""
    core = min(os.sched_getaffinity(0))
    proc = train_py(tmp_path, "hardware.num_workers=2", preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    assert proc.returncode == 0, proc.out[-3000:]
    said = [line for line in proc.out.splitlines() if "rollout workers (2 envs each) share 1 core" in line]
    assert len(said) == 1, proc.out[-3000:]
    assert "hardware.num_workers=2" in said[0] and "hardware.num_workers=auto would pick 1 here" in said[0]


def test_workers_within_the_cores_say_nothing_of_them(finished_run):
    _, out = finished_run  # one worker (TINY), on every core this test runs on
    assert "hardware.num_workers=auto would pick" not in out
