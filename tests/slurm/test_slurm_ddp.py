"""A data-parallel run on the real Slurm cluster: `hardware.devices=2` through `hydra/launcher=slurm` is one job
of two tasks (tasks_per_node follows hardware.devices), one learner rank each, as one run."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import torch

from tests.slurm.jobs import wait_until


@pytest.mark.slow  # ~30 s on the local cluster: the "2-task job completes" check, in CI
def test_two_tasks_train_one_run(sweep):
    code = sweep.run("hardware.devices=2", "hardware.num_workers=1", "train_for_env_steps=4000", timeout=300)
    assert code == 0, sweep.output[-3000:]
    run = sweep.dir / "run"
    summary = json.loads((run / "summary.json").read_text())
    # Both ranks' frames count: 128 per rank and learner step (tests/conftest.py FAST_OVERRIDES).
    assert summary["env_steps"] >= 4000 and summary["env_steps"] == 2 * 128 * summary["policy_version"], summary
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["sf_hydra"]["env_steps"] == summary["env_steps"]
    # Two Slurm tasks (submitit's per-task logs), rank 1 logging to its own file, rank 0 alone in train.log.
    assert sorted(p.name.split("_")[1] for p in sweep.dir.glob(".submitit/*/*_log.out")) == ["0", "1"]
    assert "env steps" in (run / "ranks" / "rank_1.log").read_text()
    assert (run / "train.log").read_text().count("run folder ") == 1


@pytest.mark.long  # ~90 s: a requeue waits for Slurm
def test_preempted_two_task_job_is_requeued_and_both_ranks_resume(sweep):
    budget = 400_000  # far beyond where the signal lands (the job runs at ~10-20k FPS here)
    sweep.start("hardware.devices=2", "hardware.num_workers=1", f"train_for_env_steps={budget}",
                "train_until_avg_return=null", "hydra.launcher.timeout_min=10")
    run = sweep.dir / "run"
    train_log, rank1_log = run / "train.log", run / "ranks" / "rank_1.log"
    wait_until(lambda: train_log.exists() and "env steps" in train_log.read_text(), 240, "training inside the job")
    [job] = sweep.job_ids()
    subprocess.run(["scancel", "--signal=USR2", job], check=True)  # what Slurm sends before the time limit
    wait_until(lambda: sweep.job_state(job) == "PENDING", 60, "the job back in the queue")
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
    assert sweep.wait(timeout=300) == 0, sweep.output[-3000:]
    first, resumed = train_log.read_text().split("resuming from last.ckpt")
    saved_at = int(re.search(r"stopped \(signal SIGUSR2\): (\d+) env steps", first).group(1))
    assert "resuming from last.ckpt" in rank1_log.read_text()  # rank 1 restored the checkpoint too
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= budget > saved_at > 0
    assert summary["env_steps"] == 2 * 128 * summary["policy_version"]  # counted on from both ranks' steps
    history = wait_until(lambda: (h := sweep.history(job))[-1:] == ["COMPLETED"] and h, 60, "COMPLETED in sacct")
    assert history == ["REQUEUED", "COMPLETED"], history


@pytest.mark.slow  # two ~30 s jobs
def test_a_restarted_two_task_run_starts_every_rank_anew(sweep):
    """Slurm starts both tasks at once: rank 1 acts on rank 0's decision (ranks/start.json), not on the old run's
    checkpoint it would find in the folder before rank 0 moved it aside (tests/ddp/test_slurm_tasks.py forces
    that order without Slurm)."""
    common = ("hardware.devices=2", "hardware.num_workers=1", "train_for_env_steps=2000")
    assert sweep.run(*common, timeout=300) == 0, sweep.output[-3000:]
    assert sweep.run(*common, "restart_behavior=restart", timeout=300) == 0, sweep.output[-3000:]
    run = sweep.dir / "run"
    rank1 = (run / "ranks" / "rank_1.log").read_text()
    assert rank1.count("(new run)") == 2 and "resuming from" not in rank1, rank1[-3000:]
    assert [p.name.startswith("run_old_") for p in sweep.dir.iterdir() if p.name != ".submitit"].count(True) == 1
    summary = json.loads((run / "summary.json").read_text())
    assert 2000 <= summary["env_steps"] == 2 * 128 * summary["policy_version"], summary
