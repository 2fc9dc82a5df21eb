"""Ranks stop together, resume together, and a rank that dies ends the whole run (real processes)."""

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.core.faults import RankFailed
from tests.conftest import make_cfg
from tests.ddp.test_two_ranks import STATE, _same
from tests.faults.runs import REPO, env_with_repo
from tests.helpers.processes import sampler_processes

TWO_RANKS = ("hardware.devices=2", "hardware.num_workers=1")


def _rank_1():
    """The process of learner rank 1, a child of this (rank 0's) process."""
    for proc in psutil.Process().children():
        try:
            if "sf_hydra.app.ddp_rank" in " ".join(proc.cmdline()):
                return proc
        except psutil.Error:
            continue
    return None


def _when_rank_1_trains(run_dir, act) -> threading.Thread:
    """Calls act(rank 1's psutil.Process) once rank 1 printed its first progress line (it trains)."""
    def watch():
        log = run_dir / "ranks" / "rank_1.log"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if log.is_file() and "env steps" in log.read_text():
                act(_rank_1())
                return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_signal_to_one_rank_stops_every_rank_and_resume_restores_every_rank(tmp_path):
    cfg = make_cfg(tmp_path, *TWO_RANKS, "train_for_env_steps=10000000", "train_for_seconds=90")
    watcher = _when_rank_1_trains(tmp_path / "test", lambda rank: os.kill(rank.pid, signal.SIGTERM))
    started = time.monotonic()
    first = train(cfg)
    watcher.join()
    assert first["stop_reason"] == "learner rank 1: signal SIGTERM"  # rank 0 got no signal, and stopped too
    assert time.monotonic() - started < 80
    ckpt = torch.load(tmp_path / "test" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["sf_hydra"]["env_steps"] == first["env_steps"] > 0
    assert _rank_1() is None and sampler_processes() == []

    states = tmp_path / "states"
    budget = first["env_steps"] + 2000
    second = train(make_cfg(tmp_path, *TWO_RANKS, f"train_for_env_steps={budget}",
                            f"+callbacks.rank_state._target_={STATE}", f"+callbacks.rank_state.directory={states}"))
    assert second["env_steps"] >= budget and second["policy_version"] > first["policy_version"]
    assert second["env_steps"] - first["env_steps"] < 4000  # the second session only trained the difference
    rank0, rank1 = (torch.load(states / f"rank_{r}.pt", weights_only=False) for r in (0, 1))
    # Rank 1 restored the counters, Adam's moments and the statistics windows too, not only rank 0's weights.
    assert rank1["sf_hydra"]["env_steps"] == second["env_steps"]
    assert _same(rank0, rank1) == []


@pytest.mark.slow
def test_a_killed_rank_ends_the_run_naming_it(tmp_path):
    cfg = make_cfg(tmp_path, *TWO_RANKS, "train_for_env_steps=10000000", "train_for_seconds=90", "save_every_sec=1",
                   "hardware.ddp_timeout_sec=20")
    killed = {}

    def kill(rank):
        time.sleep(2.5)  # a periodic checkpoint or two first
        killed["below"] = rank.children(recursive=True)  # its sampler's processes, orphaned by the kill
        killed["at"] = time.monotonic()
        rank.kill()

    watcher = _when_rank_1_trains(tmp_path / "test", kill)
    with pytest.raises(RankFailed) as failed:
        train(cfg)
    watcher.join()
    assert "learner rank 1 was killed by signal 9" in str(failed.value)
    assert time.monotonic() - killed["at"] < 40  # bounded: the collective's timeout (20 s) and the teardown
    assert _rank_1() is None and sampler_processes() == []
    assert killed["below"], "rank 1 had no sampler processes"
    _, alive = psutil.wait_procs(killed["below"], timeout=15)  # they notice their learner is gone and exit
    assert alive == [], alive
    ckpt = torch.load(tmp_path / "test" / "checkpoints" / "last.ckpt", weights_only=False)  # intact, loadable
    assert ckpt["sf_hydra"]["env_steps"] > 0


@pytest.mark.slow
def test_a_rank_whose_env_crashes_ends_the_run_naming_rank_and_cause(tmp_path):
    cfg = make_cfg(tmp_path, *TWO_RANKS, "env=gym/any", "env.id=tests.helpers.faulty_envs:CrashingOnRank1CartPole-v0",
                   "hardware.max_env_restarts=0", "train_for_env_steps=10000000", "train_for_seconds=90",
                   "hardware.ddp_timeout_sec=20")
    started = time.monotonic()
    with pytest.raises(RankFailed) as failed:
        train(cfg)
    message = str(failed.value)
    # The cause: the worker's failure as rank 1 saw it (its report, or its death when that came first) ...
    assert "learner rank 1 exited with code 1: rollout" in message and "worker-0" in message.replace(" ", "-"), message
    log = tmp_path / "test" / "ranks" / "rank_1.log"
    assert f"(its log: {log})" in message and "boom: the simulator crashed" in log.read_text()  # ... and in full
    assert time.monotonic() - started < 80
    assert _rank_1() is None and sampler_processes() == []


@pytest.mark.long  # ~30 s; the killed-rank-1 test above covers the collective's failure in CI
def test_killing_rank_0_of_python_train_py_leaves_no_process(tmp_path):
    """`python train.py hardware.devices=2` killed with -9 (rank 0, the command line's process): rank 1's next
    collective fails, it exits, and its sampler's processes follow; the last periodic checkpoint stays whole."""
    cmd = [sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=run", *TWO_RANKS,
           "train_for_env_steps=10000000", "train_for_seconds=120", "save_every_sec=1", "hardware.ddp_timeout_sec=20",
           "logger.log_interval_sec=1"]
    with open(tmp_path / "out.log", "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env_with_repo())
    try:
        rank1_log = tmp_path / "run" / "ranks" / "rank_1.log"
        deadline = time.monotonic() + 120
        while not (rank1_log.is_file() and "env steps" in rank1_log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2.5)  # a periodic checkpoint or two
        tree = psutil.Process(proc.pid).children(recursive=True)
        assert any("sf_hydra.app.ddp_rank" in " ".join(p.cmdline()) for p in tree)
        proc.kill()
        proc.wait()
        _, alive = psutil.wait_procs(tree, timeout=45)  # rank 1: the collective fails at once or times out (20 s)
        assert alive == [], [" ".join(p.cmdline()) for p in alive]
    finally:
        if proc.poll() is None:
            proc.kill()
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["sf_hydra"]["env_steps"] > 0


@pytest.mark.slow
def test_rank_0s_own_failure_is_named_as_rank_0s_with_its_message(tmp_path, caplog):
    cfg = make_cfg(tmp_path, *TWO_RANKS, "train_for_env_steps=10000000", "train_for_seconds=90",
                   "hardware.ddp_timeout_sec=20", "+callbacks.fail._target_=tests.helpers.failing_callbacks.FailInRank",
                   "+callbacks.fail.rank=0", "+callbacks.fail.message=the callback of rank 0 broke")
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="the callback of rank 0 broke") as failed:
        train(cfg)
    assert not isinstance(failed.value, RankFailed)  # not blamed on rank 1, whose collective broke after it
    assert "learner rank 0 failed (RuntimeError: the callback of rank 0 broke)" in caplog.text
    assert time.monotonic() - started < 80
    assert _rank_1() is None and sampler_processes() == []


@pytest.mark.slow
def test_a_stopped_rank_is_named_within_the_timeout_and_no_process_is_left(tmp_path):
    cfg = make_cfg(tmp_path, *TWO_RANKS, "train_for_env_steps=10000000", "train_for_seconds=120",
                   "hardware.ddp_timeout_sec=15")
    stopped = {}

    def stop(rank):
        time.sleep(1.0)
        stopped["below"] = rank.children(recursive=True)
        stopped["at"] = time.monotonic()
        rank.suspend()  # SIGSTOP

    watcher = _when_rank_1_trains(tmp_path / "test", stop)
    with pytest.raises(RankFailed) as failed:
        train(cfg)
    watcher.join()
    assert time.monotonic() - stopped["at"] < 15 + 15, str(failed.value)  # the timeout, and a few seconds
    assert "learner rank 1 was stopped (SIGSTOP or a debugger)" in str(failed.value), str(failed.value)
    assert _rank_1() is None and sampler_processes() == []
    _, alive = psutil.wait_procs(stopped["below"], timeout=15)
    assert alive == [], alive
