"""The limit on requeues for lost nodes (sf_hydra.app.requeue.NODE_LOSS_REQUEUES) counts the job's requeues for lost
nodes alone: a job preempted many times (SLURM_RESTART_COUNT counts every requeue) still gets its requeues when a
node is lost. Runs without a cluster: `scontrol` is a script that records how it was called."""

from __future__ import annotations

import os
import stat

import pytest

from sf_hydra.app.requeue import NODE_LOSS_REQUEUES, requeue_after_node_loss
from sf_hydra.core.faults import NodeLost


@pytest.fixture
def scontrol_calls(tmp_path, monkeypatch):
    """A fake `scontrol` first on PATH; returns a function listing the calls it got (one line of arguments each)."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "scontrol_calls"
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return lambda: calls.read_text().splitlines() if calls.exists() else []


def lose_a_node(run_dir) -> bool:
    """The launcher's handling of a run that ended with a lost node; True: the job was requeued (the job exits)."""
    try:
        requeue_after_node_loss(NodeLost("the run stopped: learner rank 1 was lost with its node", "sfn2"), run_dir)
    except SystemExit:
        return True
    return False


def test_preemptions_do_not_use_up_the_requeues_for_lost_nodes(tmp_path, monkeypatch, scontrol_calls):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    restarts = 5  # preempted (or timed out) and requeued five times already
    for _ in range(NODE_LOSS_REQUEUES):
        monkeypatch.setenv("SLURM_RESTART_COUNT", str(restarts))
        assert lose_a_node(tmp_path / "run")
        restarts += 1
    monkeypatch.setenv("SLURM_RESTART_COUNT", str(restarts))
    assert not lose_a_node(tmp_path / "run")  # the limit: the job reports the lost node
    assert scontrol_calls() == ["requeue 77"] * NODE_LOSS_REQUEUES


def test_another_job_in_the_same_run_folder_counts_from_zero(tmp_path, monkeypatch, scontrol_calls):
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    for _ in range(NODE_LOSS_REQUEUES):
        assert lose_a_node(tmp_path / "run")
    monkeypatch.setenv("SLURM_JOB_ID", "78")  # the sweep submitted again: a new job, its own requeues
    assert lose_a_node(tmp_path / "run")
    assert scontrol_calls()[-1] == "requeue 78"


def test_the_launcher_counts_them_in_the_jobs_run_folder(tmp_path, monkeypatch, scontrol_calls):
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    from sf_hydra.app.requeue import RequeueAfterCheckpoint, node_loss_requeues

    run_dir = tmp_path / "multirun" / "s" / "seed=1"

    class Job:  # what hydra-submitit-launcher's __call__ returns for a run that ended with a lost node
        def __call__(self):
            result = JobReturn(hydra_cfg=OmegaConf.create({"hydra": {"runtime": {"output_dir": str(run_dir)}}}),
                               status=JobStatus.FAILED)
            result.return_value = NodeLost("the run stopped: learner rank 1 was lost with its node", "sfn2")
            return result

    class Launcher(RequeueAfterCheckpoint, Job):
        pass

    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "9")
    # no stop signal of an earlier test's run in this process (the launcher would act on it first and exit)
    monkeypatch.setattr("sf_hydra.core.signals._received", None)
    with pytest.raises(SystemExit):
        Launcher()()
    assert node_loss_requeues(run_dir, "77") == 1 and scontrol_calls() == ["requeue 77"]
