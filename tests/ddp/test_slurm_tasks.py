"""Learner ranks started as Slurm starts its tasks: all at once, each on its own, none started by rank 0
(tests/helpers/slurm_task.py sets Slurm's variables without Slurm; tests/slurm runs a real job)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch

from sf_hydra.app.ranks import free_port
from sf_hydra.app.train import train
from tests.conftest import FAST_OVERRIDES, make_cfg
from tests.ddp.test_two_ranks import _same
from tests.faults.runs import REPO, env_with_repo
from tests.slurm.jobs import wait_until

AT_START = "tests.helpers.rank_state.WriteRankStateAtStart"


class Tasks:
    """The tasks of one fake Slurm job step, each a `python -m tests.helpers.slurm_task` process."""

    def __init__(self, tmp_path, *overrides: str):
        self.tmp_path, self.overrides = tmp_path, (f"train_dir={tmp_path}", "experiment=test", *FAST_OVERRIDES,
                                                   "hardware.devices=2", "hardware.num_workers=1", *overrides)
        self.timeout = 60.0  # what a test gives the tasks to end once one failed
        self.job, self.port, self.procs = str(random.randrange(100_000, 999_999)), free_port(), {}

    def start(self, rank: int) -> None:
        with open(self.out(rank), "w") as out:
            self.procs[rank] = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.slurm_task", str(rank), "2", self.job, str(self.port),
                 *self.overrides], cwd=REPO, env=env_with_repo(), stdout=out, stderr=subprocess.STDOUT)

    def out(self, rank: int):
        return self.tmp_path / f"task_{rank}.out"

    def said(self, rank: int) -> str:
        return self.out(rank).read_text() if self.out(rank).is_file() else ""

    def wait(self, timeout: float) -> dict:
        """Every task's exit code; what still runs after `timeout` is killed (code None)."""
        codes = {}
        for rank, proc in self.procs.items():
            try:
                codes[rank] = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes[rank] = None
        return codes


@pytest.mark.slow
@pytest.mark.parametrize("behavior", ["restart", "overwrite"])
def test_slurm_tasks_start_from_rank_0s_decision_not_from_the_old_run(tmp_path, behavior):
    old = train(make_cfg(tmp_path, "train_for_env_steps=1000"))  # an earlier run in the folder, with its last.ckpt
    assert old["env_steps"] > 0
    states = tmp_path / "states"
    tasks = Tasks(tmp_path, f"restart_behavior={behavior}", "train_for_env_steps=1000",
                  f"+callbacks.rank_state._target_={AT_START}", f"+callbacks.rank_state.directory={states}")
    tasks.start(1)  # rank 1 reaches the run folder first: rank 0 has not even started
    wait_until(lambda: "rank 0's start decision" in tasks.said(1) or "run folder" in tasks.said(1), 120,
               "rank 1 at the run folder")
    tasks.start(0)
    codes = tasks.wait(timeout=240)
    assert codes == {1: 0, 0: 0}, tasks.said(0)[-2000:] + tasks.said(1)[-3000:]
    rank0, rank1 = (torch.load(states / f"rank_{r}.pt", weights_only=False) for r in (0, 1))
    assert rank0["sf_hydra"]["env_steps"] == 0  # a new run, as restart_behavior says
    assert _same(rank0, rank1) == [], "the ranks started from different learner states"
    assert "(new run)" in tasks.said(1)


def _ended(tasks: Tasks, act, timeout: float = 120) -> str:
    """Starts both tasks, calls act(rank 1's process) once rank 1 trains, and returns rank 0's output after it
    ended (a Fault: the run failed); no process of the tasks is left."""
    tasks.start(0)
    tasks.start(1)
    wait_until(lambda: "env steps" in tasks.said(1) or tasks.procs[1].poll() is not None, timeout, "rank 1 training")
    below = psutil.Process(tasks.procs[1].pid).children(recursive=True) if tasks.procs[1].poll() is None else []
    act(tasks.procs[1])
    codes = tasks.wait(timeout=tasks.timeout + 30)
    _, alive = psutil.wait_procs(below, timeout=20)
    assert alive == [], [p.cmdline() for p in alive]
    assert codes[0] not in (0, None), tasks.said(0)[-3000:]
    return tasks.said(0)


@pytest.mark.slow
def test_a_killed_slurm_rank_is_named_with_its_node_and_log(tmp_path):
    tasks = Tasks(tmp_path, "train_for_env_steps=10000000", "train_for_seconds=90", "hardware.ddp_timeout_sec=20")
    said = _ended(tasks, lambda proc: (time.sleep(1.0), proc.kill()))
    where = f"learner rank 1 on node localnode (pid {tasks.procs[1].pid}) ended without saying why"
    assert f"the run stopped: {where}" in said and f"(its log: {tasks.out(1)})" in said, said[-3000:]


@pytest.mark.slow
def test_a_failed_slurm_rank_is_named_with_its_error(tmp_path):
    tasks = Tasks(tmp_path, "train_for_env_steps=10000000", "train_for_seconds=90", "hardware.ddp_timeout_sec=20",
                  "+callbacks.fail._target_=tests.helpers.failing_callbacks.FailInRank", "+callbacks.fail.rank=1",
                  "+callbacks.fail.after=4", "+callbacks.fail.message=rank 1 broke")
    said = _ended(tasks, lambda proc: None)
    where = f"learner rank 1 on node localnode (pid {tasks.procs[1].pid}) failed: RuntimeError: rank 1 broke"
    assert f"the run stopped: {where}" in said and f"(its log: {tasks.out(1)})" in said, said[-3000:]


@pytest.mark.slow
def test_a_stopped_slurm_rank_is_named_within_the_timeout_and_killed(tmp_path):
    tasks = Tasks(tmp_path, "train_for_env_steps=10000000", "train_for_seconds=120", "hardware.ddp_timeout_sec=15")
    stopped = {}

    def stop(proc):
        time.sleep(1.0)
        stopped["at"] = time.monotonic()
        proc.send_signal(signal.SIGSTOP)

    said = _ended(tasks, stop)
    assert time.monotonic() - stopped["at"] < 15 + 15  # the timeout, a collective's start, the teardown
    where = f"learner rank 1 on node localnode (pid {tasks.procs[1].pid}) is alive but did not answer within " \
            "hardware.ddp_timeout_sec=15 s: it is stopped (SIGSTOP or a debugger); killed"
    assert f"the run stopped: {where}" in said, said[-3000:]
    assert tasks.procs[1].returncode == -signal.SIGKILL
