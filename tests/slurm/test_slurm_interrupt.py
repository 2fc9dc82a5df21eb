"""Ctrl+C (or SIGTERM) on the driver of a `hydra/launcher=slurm` sweep, which waits for its jobs,
cancels them: each job saves its checkpoint as on `scancel`, the driver names the jobs it cancelled
in one line, and re-running the same command resumes them."""

from __future__ import annotations

import re
import signal

import pytest

from tests.slurm.jobs import wait_until
from tests.slurm.test_slurm_launcher import env_steps_in, logged_steps

RUNS = ("seed=1", "seed=2")


def training(sweep) -> bool:
    """Whether every run of the sweep has logged env steps (its job is RUNNING and training)."""
    logs = [sweep.dir / run / "train.log" for run in RUNS]
    return all(log.exists() and logged_steps(log.read_text()) for log in logs)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_stopping_the_driver_cancels_its_jobs_which_save_their_checkpoints(sweep, sig):
    sweep.start("seed=1,2", "train_for_env_steps=100000000", "train_until_avg_return=null")  # no early solve
    wait_until(lambda: training(sweep), 300, "both runs training inside their jobs")
    jobs = sweep.job_ids()
    assert len(jobs) == 2 and all(sweep.job_state(job) == "RUNNING" for job in jobs), jobs

    sweep.proc.send_signal(sig)
    code = sweep.wait(timeout=90)  # the driver waits for its jobs to leave the queue
    assert code == 128 + sig, sweep.output[-3000:]
    lines = [line for line in sweep.output.splitlines() if "re-running the same command resumes" in line]
    assert len(lines) == 1, sweep.output[-3000:]
    states = {job: sweep.history(job) for job in jobs}  # how each ended, should a job be missing from the line
    assert set(re.findall(r"\b\d+_\d+\b", lines[0])) == set(jobs), (lines[0], states, sweep.output[-3000:])
    wait_until(lambda: not sweep.job_ids(), 60, f"jobs {' '.join(jobs)} gone from squeue")

    for run in RUNS:
        text = (sweep.dir / run / "train.log").read_text()
        assert "received SIGTERM: saving a checkpoint" in text, text[-2000:]  # scancel's signal, as the job got it
        # scancel signals every process of the job: the workers leave it to the learner (no worker dies of it)
        assert "sampling failed" not in text and "died" not in text, text[-2000:]
        # Saved at the stop: at least as far as the run's last progress line (a periodic checkpoint is older).
        assert env_steps_in(sweep.dir / run / "checkpoints" / "last.ckpt") >= max(logged_steps(text)) > 0
