"""Losing a node of a two-node run (`cluster/slurm/start.sh --two-nodes`): every process of node sfn2 is killed
mid-run (cluster/slurm/node.sh kill: its slurmd, the job's slurmstepd, rank 1 and its workers), as when a host
loses power. Rank 0 on sfn1 stops the run at once with an error naming the lost node and its rank, leaves its last
checkpoint whole and requeues the job (sf_hydra.app.requeue); once the node is back (node.sh restart) the job runs
again on both nodes and the run resumes from that checkpoint and finishes, in the same run folder."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.conftest import REPO_ROOT
from tests.slurm.conftest import PARTITION
from tests.slurm.jobs import slurm, wait_until
from tests.slurm.test_slurm_launcher import env_steps_in, logged_steps

NODE_SH = REPO_ROOT / "cluster" / "slurm" / "node.sh"
LOST = "sfn2"  # the job's second node: rank 1's (rank 0 runs on the first, sfn1)
DDP_TIMEOUT = 20


def node_sh(action: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(NODE_SH), action, LOST], capture_output=True, text=True, timeout=120)


def others_jobs() -> str:
    """The jobs in partition PARTITION (none of this test's yet): losing a node would kill theirs."""
    return slurm("squeue", "-h", "-p", PARTITION, "-o", "%i %j").strip()


@pytest.fixture
def losable_node(two_nodes):
    """Node LOST, which the test may kill, once no other job runs in its partition (this test's own job then
    holds both nodes: --exclusive); whatever the test did, the node runs again afterwards."""
    if os.geteuid() != 0:
        pytest.skip("losing a node kills its slurmd, which runs as root: run the Slurm tests as root (as start.sh)")
    try:
        wait_until(lambda: not others_jobs(), 180, "partition two_nodes without jobs")
    except AssertionError:
        pytest.skip(f"other jobs keep partition {PARTITION} busy ({others_jobs()}): losing a node would kill them")
    yield LOST
    back = node_sh("restart")  # "runs already" when the test brought it back itself
    assert back.returncode == 0 or "runs already" in back.stderr, back.stdout + back.stderr


def job_processes(node: str, job: str) -> list:
    """The processes on namespace node `node` that belong to Slurm job `job` (its slurmstepd, srun, tasks)."""
    ns = f"net:[{os.stat(f'/run/netns/sfh-{node}').st_ino}]"  # cluster/slurm/netns.sh: the node's namespace
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/ns/net") != ns:
                continue
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"[{job}." in cmdline or f"SLURM_JOB_ID={job}".encode() in environ:
            found.append(f"{pid} {cmdline[:80]}")
    return found


def error_line(path, marker: str):
    """The first ERROR line of log `path` holding `marker`, or None."""
    text = path.read_text() if path.exists() else ""
    return next((line for line in text.splitlines() if "[ERROR]" in line and marker in line), None)


@pytest.mark.slow  # ~2 min: a two-node job, the node lost, the job requeued and run again
def test_lost_node_stops_the_run_naming_it_and_the_requeued_job_resumes_on_both_nodes(losable_node, sweep,
                                                                                     monkeypatch):
    # A learner step of at least 0.25 s (tests/helpers/pace.py, found through PYTHONPATH, which sbatch exports): the
    # run cannot reach its budget before the node is lost, however fast the machine is (a run of 6,000 steps once
    # finished within a second of its first checkpoint, before the kill).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    budget = 12000
    sweep.start("hardware.num_nodes=2", "hardware.devices=1", "hardware.num_workers=1", f"train_for_env_steps={budget}",
                f"hydra.launcher.partition={PARTITION}", "save_every_sec=1", "keep_checkpoints=100",
                f"hardware.ddp_timeout_sec={DDP_TIMEOUT}", "+hydra.launcher.additional_parameters.exclusive=true",
                "+callbacks.pace._target_=tests.helpers.pace.PaceSteps", "+callbacks.pace.seconds=0.25")
    run = sweep.dir / "run"
    checkpoints, train_log = run / "checkpoints", run / "train.log"
    wait_until(lambda: any(int(p.stem.split("_")[1]) >= 1024 for p in checkpoints.glob("checkpoint_*.ckpt")), 240,
               "a checkpoint at 1024 env steps or more")
    [job] = sweep.job_ids()

    t0 = time.monotonic()
    killed = node_sh("kill")
    assert killed.returncode == 0 and f"node {LOST} lost" in killed.stdout, killed.stdout + killed.stderr

    # Rank 0 stops at once (its collective breaks), naming the rank and the node, which does not answer.
    line = wait_until(lambda: error_line(train_log, "the run stopped"), DDP_TIMEOUT + 15, "rank 0's error")
    stopped_after = time.monotonic() - t0
    assert f"learner rank 1 on node {LOST} (pid " in line and "was lost with its node" in line, line
    assert f"node {LOST} does not answer: its slurmd at 10.87.0.3:" in line, line
    # ... and requeues the job, which Slurm holds until the node answers again.
    wait_until(lambda: "REQUEUED" in sweep.history(job), 60, "the job requeued")
    requeued_after = time.monotonic() - t0
    assert sweep.proc.poll() is None, sweep.output[-3000:]  # the sweep waits for the job's next run

    # Every checkpoint left is whole (last.ckpt among them): each loads, its steps those of its name.
    files = sorted(checkpoints.glob("checkpoint_*.ckpt"))
    assert all(env_steps_in(f) == int(f.stem.split("_")[1]) for f in files), files
    steps = [env_steps_in(f) for f in files]
    saved_at = steps[-1]  # the newest learner state, which a resume picks
    last = env_steps_in(checkpoints / "last.ckpt")
    assert last in steps[-2:], (last, steps)  # the newest, or the one before when the node was lost mid-save
    assert saved_at >= 1024

    # The node comes back; Slurm's requeue hold (2 minutes) is lifted once it has.
    back = node_sh("restart")
    assert back.returncode == 0, back.stdout + back.stderr
    wait_until(lambda: sweep.job_state(job) == "PENDING", 60, "the job back in the queue")
    # What the hold is for: the first run's processes on the surviving node end (SIGKILL after KillWait); a second
    # run started before would be killed with them (a node's slurmd kills a job's processes by job id).
    wait_until(lambda: not job_processes("sfn1", job), 60, f"the first run of job {job} gone from sfn1")
    slurm("scontrol", "update", f"JobId={job}", "StartTime=now")
    code = sweep.wait(timeout=300)
    assert code == 0, sweep.output[-3000:]

    # One run folder; its second session resumed from the checkpoint's steps, on both nodes, and finished.
    assert sorted(p.name for p in sweep.dir.iterdir() if p.is_dir() and not p.name.startswith(".")) == ["run"]
    text = train_log.read_text()
    first, resumed = text.split(f"run folder {run} (resuming from ")
    steps_after = logged_steps(resumed)
    assert saved_at < steps_after[0] < budget, (saved_at, steps_after[:3])
    assert first.count("learner rank 0 on node sfn1: gloo over") == 2  # logged before each session's "run folder"
    rank1 = (run / "ranks" / "rank_1.log").read_text()
    assert rank1.count(f"learner rank 1 on node {LOST}: gloo over") == 2 and "(resuming from " in rank1
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= budget and summary["env_steps"] == 2 * 128 * summary["policy_version"], summary
    history = wait_until(lambda: (h := sweep.history(job))[-1:] == ["COMPLETED"] and h, 60, "the job COMPLETED")
    assert history == ["REQUEUED", "COMPLETED"], history
    print(f"rank 0 stopped {stopped_after:.1f} s after the node was lost; the job was requeued after "
          f"{requeued_after:.1f} s; resumed from {saved_at} env steps")
