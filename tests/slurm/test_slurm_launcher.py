"""`hydra/launcher=slurm` on the real cluster: a sweep's runs train as Slurm jobs; a
cancelled job fails the sweep, naming the job, instead of hanging it; a preempted job is
requeued and its run resumes from the checkpoint it saved, step counter included."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import torch

from tests.slurm.jobs import slurm, wait_until


def env_steps_in(checkpoint) -> int:
    return torch.load(checkpoint, map_location="cpu", weights_only=False)["sf_hydra"]["env_steps"]


def logged_steps(text: str) -> list:
    """The env-step counts of a run's progress lines, in order."""
    return [int(n) for n in re.findall(r"env steps (\d+) \|", text)]


@pytest.mark.slow
def test_sweep_trains_each_run_as_a_slurm_job(sweep):
    code = sweep.run("seed=1,2", "train_for_env_steps=10000", timeout=300)
    assert code == 0, sweep.output[-3000:]
    for run in ("seed=1", "seed=2"):
        summary = json.loads((sweep.dir / run / "summary.json").read_text())
        assert summary["env_steps"] >= 10000, summary
        assert env_steps_in(sweep.dir / run / "checkpoints" / "last.ckpt") == summary["env_steps"]
    # Two jobs of one array, both run to completion by Slurm (sacct: what submitit polls).
    def states():
        lines = slurm("sacct", "-X", "-n", "-P", "-S", "now-2hours", f"--name={sweep.job_name}", "-o",
                      "JobID,State").split()
        return dict(line.split("|") for line in lines)
    jobs = wait_until(lambda: (s := states()) and set(s.values()) == {"COMPLETED"} and s, 60,
                      "both jobs COMPLETED in sacct")
    assert len(jobs) == 2 and all("_" in job for job in jobs), jobs


@pytest.mark.long  # kept out of CI's 30 minutes (see pyproject.toml); run with -m long
def test_cancelled_job_fails_the_sweep_and_names_the_job(sweep):
    sweep.start("seed=1", "train_for_env_steps=100000000", "train_until_avg_return=null")  # no early solve
    train_log = sweep.dir / "run" / "train.log"
    wait_until(lambda: train_log.exists() and logged_steps(train_log.read_text()), 240, "training inside the job")
    [job] = sweep.job_ids()
    subprocess.run(["scancel", job], check=True)
    code = sweep.wait(timeout=180)
    assert code != 0
    assert re.search(rf"Job {job}\b[^\n]*\n?[^\n]*CANCELLED", sweep.output), sweep.output[-3000:]
    # The cancel reached training as SIGTERM: it stopped with a checkpoint.
    assert "received SIGTERM" in train_log.read_text()
    assert env_steps_in(sweep.dir / "run" / "checkpoints" / "last.ckpt") > 0


@pytest.mark.slow
def test_preempted_job_is_requeued_and_resumes_its_run(sweep):
    # Far from the 3000 steps at which the signal is sent: a job runs at ~5000 FPS, and a budget
    # reached before the signal lands leaves nothing to resume.
    budget = 60000
    # With a 10-minute limit, submitit takes any USR2 as "near the time limit" (its timeout
    # path: requeue while max_num_timeout allows); Slurm itself would send it at 8 minutes.
    # No early stop: CartPole's tuned defaults can reach 450 before the budget, and the budget is what is checked.
    sweep.start("seed=1", f"train_for_env_steps={budget}", "train_until_avg_return=null", "keep_checkpoints=10",
                "hydra.launcher.timeout_min=10")
    run_dir = sweep.dir / "run"
    train_log = run_dir / "train.log"
    wait_until(lambda: train_log.exists() and any(n >= 3000 for n in logged_steps(train_log.read_text())),
               240, "3000 env steps of training inside the job")
    [job] = sweep.job_ids()
    # What Slurm sends `signal_delay_s` before the time limit.
    subprocess.run(["scancel", "--signal=USR2", job], check=True)
    wait_until(lambda: sweep.job_state(job) == "PENDING", 60, "the job back in the queue")
    # Slurm holds a requeued job for 2 minutes (its EligibleTime); let it start now.
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
    code = sweep.wait(timeout=300)
    assert code == 0, sweep.output[-3000:]

    text = train_log.read_text()
    first, resumed = text.split("resuming from last.ckpt")
    saved_at = int(re.search(r"stopped \(signal SIGUSR2\): (\d+) env steps", first).group(1))
    assert saved_at >= 3000
    assert env_steps_in(run_dir / "checkpoints" / f"checkpoint_{saved_at:012d}.ckpt") == saved_at
    # The second session counts on from the saved steps (a fresh start would log ~128 first); how far it
    # got before its first progress line depends on how fast it started.
    steps_after = logged_steps(resumed)
    assert saved_at < steps_after[0] < budget, (saved_at, steps_after[:3])
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] >= budget
    # Only training took the signal: no rollout worker or helper process died of it.
    job_errors = (sweep.dir / ".submitit" / job / f"{job}_0_log.err").read_text()
    assert "Traceback" not in job_errors and "died" not in job_errors, job_errors[-3000:]
    history = wait_until(lambda: (h := sweep.history(job))[-1:] == ["COMPLETED"] and h, 60,
                         "the job COMPLETED in sacct")
    assert history == ["REQUEUED", "COMPLETED"], history
