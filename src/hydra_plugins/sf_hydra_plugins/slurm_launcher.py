"""The launcher of `hydra/launcher=slurm` (conf/hydra/launcher/slurm.yaml).

The sweep's driver waits for its jobs (hydra-submitit-launcher has no fire-and-forget mode), so stopping
the driver stops its jobs too: on Ctrl+C or SIGTERM (which reach the driver as KeyboardInterrupt and
SystemExit, sf_hydra.app.cli) it cancels the jobs it submitted that are still queued or running. Slurm
sends each SIGTERM, on which training saves its checkpoint and stops (sf_hydra.app.requeue); the driver
waits until Slurm no longer lists them, so that when it exits the checkpoints are on disk and re-running
the same command resumes every run (a job still saving would hold its run folder's lock).

The jobs are known from the executor itself (the library's `launch` keeps them to itself): while it
runs, the executor it makes is one that records every job it submits, rather than a guess from the
sweep's `.submitit` folders (which hold earlier drivers' jobs too) or from job names (shared by every
sweep of the same script).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from typing import Iterator, List, Optional, Sequence

from sf_hydra.app.requeue import RequeueAfterCheckpoint

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as SubmititSlurmLauncher
except ImportError:  # no `slurm` extra: no Slurm launcher (and no plugin warning at every start)
    SubmititSlurmLauncher = None

STOP_WAIT_S = 60  # how long a stopped driver waits for its cancelled jobs to save and leave the queue
SLURM_TIMEOUT_S = 30  # for one squeue / scancel call


@contextlib.contextmanager
def recording_jobs(jobs: List) -> Iterator[None]:
    """Within the block, every executor made as `submitit.AutoExecutor(...)` (how the library's `launch`
    makes its executor) appends each job it submits to `jobs`, as soon as Slurm has accepted it."""
    import submitit  # lazy, as in the library: plugin discovery stays fast

    made = submitit.AutoExecutor

    class Recording(made):
        def _internal_process_submissions(self, delayed_submissions):  # every submission path ends here
            submitted = super()._internal_process_submissions(delayed_submissions)
            jobs.extend(submitted)
            return submitted

    submitit.AutoExecutor = Recording
    try:
        yield
    finally:
        submitit.AutoExecutor = made


def queued(job_ids: Sequence[str]) -> Optional[List[str]]:
    """Those of `job_ids` that Slurm still lists (pending, running or completing), one per array task;
    None when squeue does not answer."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i", "-j", ",".join(job_ids)], capture_output=True,
                             text=True, timeout=SLURM_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:  # every id already forgotten by Slurm: "Invalid job id specified"
        return [] if "Invalid job id" in out.stderr else None
    listed = set(out.stdout.split())
    return [job for job in job_ids if job in listed]


def cancel(jobs: Sequence) -> None:
    """Cancels those of `jobs` that have no result yet and that Slurm still lists, says so in one line
    (or how to cancel them where that failed), then waits up to STOP_WAIT_S for them to leave the queue
    (their checkpoints saved). Another Ctrl+C or SIGTERM meanwhile stops the wait, not the cancel."""
    pending = [job.job_id for job in jobs if not job.paths.result_pickle.exists()]
    ids = queued(pending) if pending else []
    if ids is None:  # squeue does not answer: cancel them all
        ids = pending
    if not ids:
        return
    listed = " ".join(ids)
    failure = scancel(ids)
    if failure:
        print(f"Slurm jobs {listed} keep running: cancelling them failed ({failure}); cancel them with "
              f"`scancel {listed}`", file=sys.stderr)
        return
    print(f"cancelled Slurm jobs {listed}: each saves its checkpoint and stops; re-running the same command "
          f"resumes them", file=sys.stderr)
    try:
        left = wait_until_gone(ids)
    except (KeyboardInterrupt, SystemExit):
        return
    if left:
        print(f"Slurm jobs {' '.join(left)} are still stopping after {STOP_WAIT_S} s (squeue -j "
              f"{','.join(left)}); re-run once they are gone", file=sys.stderr)


def scancel(job_ids: Sequence[str]) -> Optional[str]:
    """Asks Slurm to cancel `job_ids` (it sends each job SIGTERM); why that failed, or None."""
    try:
        out = subprocess.run(["scancel", *job_ids], capture_output=True, text=True, timeout=SLURM_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    return out.stderr.strip() or f"exit status {out.returncode}" if out.returncode != 0 else None


def wait_until_gone(job_ids: Sequence[str]) -> List[str]:
    """Polls squeue until it lists none of `job_ids` or STOP_WAIT_S passed; the ones still listed."""
    deadline = time.monotonic() + STOP_WAIT_S
    left = list(job_ids)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = queued(left)
        if left is None:  # squeue does not answer: nothing to wait for that we could see
            return []
    return left


if SubmititSlurmLauncher is not None:

    class SlurmLauncher(RequeueAfterCheckpoint, SubmititSlurmLauncher):
        """hydra-submitit-launcher's Slurm launcher; a preempted or timed-out run saves its
        checkpoint before submitit requeues the job (sf_hydra/app/requeue.py), and stopping
        the sweep's driver cancels its jobs, each saving its checkpoint (`cancel`)."""

        def launch(self, job_overrides, initial_job_idx):
            jobs: List = []
            with recording_jobs(jobs):
                try:
                    return super().launch(job_overrides, initial_job_idx)
                except (KeyboardInterrupt, SystemExit):  # Ctrl+C, or SIGTERM (app/cli.py's handler)
                    cancel(jobs)
                    raise
