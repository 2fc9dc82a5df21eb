"""`hydra/launcher=slurm`: hydra-submitit-launcher's Slurm launcher, with requeueing that
keeps a run's progress.

submitit asks Slurm to send its preemption signal (USR2) `signal_delay_s` before the time
limit (and a preempting scheduler or `scancel --signal=USR2` sends it too). submitit's own
handler calls the launcher's `checkpoint()` (which resubmits the same Hydra job), runs
`scontrol requeue` and exits; run from the middle of a learner step it would lose all
progress since the last periodic checkpoint. So training takes the signal first
(StopConditions: finish the step, stop, save last.ckpt), and only once the run has
returned does this launcher hand the signal on to submitit's handler. The requeued job
runs the same Hydra job in the same run folder, which resumes from last.ckpt with its
step counter (`restart_behavior=resume`).

A lost node (every process of one of the job's nodes gone, its slurmd too: sf_hydra.core.faults.NodeLost,
which rank 0 raises when a collective broke and the rank's node no longer answers) is requeued too: Slurm
itself would only notice it after SlurmdTimeout (minutes), and until then the job step waits for the lost
task while the sweep waits for the job. Rank 0 requeues the job (`scontrol requeue`, as submitit does on
preemption) and exits without a result, up to NODE_LOSS_REQUEUES times per job for lost nodes (counted on their own
in the run folder, `ranks/node_loss_requeues.json`: a job preempted often keeps them); Slurm runs it again once it
has the nodes (after its requeue hold), and the run resumes from its last checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from sf_hydra.core import signals
from sf_hydra.core.faults import NodeLost
from sf_hydra.core.files import write_atomically

log = logging.getLogger("sf_hydra")
NODE_LOSS_REQUEUES = 3  # a job's requeues for lost nodes (not preemptions) below which a lost node requeues it
NODE_LOSSES = Path("ranks", "node_loss_requeues.json")  # in the run folder (app/ranks.py's RANKS_DIR, a sibling
# layer): {"job": SLURM_JOB_ID, "requeues": n}


class RequeueAfterCheckpoint:
    """Mixed into one of hydra-submitit-launcher's launchers (hydra_plugins/sf_hydra_plugins,
    where Hydra wants plugins): in the job, a stop signal is acted on only after the run has
    saved its checkpoint."""

    def __call__(self, *args, **kwargs):
        signals.hold_preemption()
        try:
            result = super().__call__(*args, **kwargs)
        finally:
            after_stop_signal()
        error = getattr(result, "_return_value", None)  # Hydra's JobReturn: the run's error
        if isinstance(error, NodeLost):
            requeue_after_node_loss(error, Path(result.hydra_cfg.hydra.runtime.output_dir))  # the run's folder
        return result


def after_stop_signal() -> None:
    """In a job whose run a signal stopped (its checkpoint is saved by now): the preemption
    signal goes on to submitit, which requeues the job and exits; any other signal (Slurm's
    SIGTERM on `scancel`, or before a kill) ends the job without a result, so that submitit
    reports what Slurm's accounting says (CANCELLED, ...) instead of a finished run."""
    sig = signals.received()
    signals.release()
    if sig is None:
        return
    if sig == signals.preemption_signal():
        submitit_handler = signal.getsignal(sig)
        if callable(submitit_handler):
            log.warning("%s: checkpoint saved; handing over to submitit to requeue the job", sig.name)
            submitit_handler(sig, None)  # dumps checkpoint(), `scontrol requeue`, exits
            return
    log.error("stopped by %s with a checkpoint saved: the job ends without a result", sig.name)
    sys.exit(128 + sig)


def requeue_after_node_loss(error: NodeLost, run_dir: Path) -> None:
    """When the run in `run_dir` ended with a lost node (`error`, raised by rank 0) and this job was requeued for
    lost nodes fewer than NODE_LOSS_REQUEUES times (its requeues for preemption do not count): counts this one,
    requeues the job and exits without a result (the sweep keeps waiting for the job, as after a preemption); else
    returns, and the job reports the error."""
    job = os.environ.get("SLURM_JOB_ID")
    if job is None:
        return
    done = node_loss_requeues(run_dir, job)
    if done >= NODE_LOSS_REQUEUES:
        log.error("node %s was lost; job %s is not requeued: it was requeued %d times for lost nodes already",
                  error.node, job, done)
        return
    try:
        _count_node_loss_requeue(run_dir, job, done + 1)  # first: a requeue never goes uncounted
        subprocess.run(["scontrol", "requeue", job], check=True, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        log.error("node %s was lost; requeueing job %s failed (%s)", error.node, job,
                  getattr(e, "stderr", None) or e)
        return
    log.warning("node %s was lost: job %s requeued (%d of at most %d requeues for lost nodes); it runs again once "
                "Slurm has its nodes back and resumes from the run's last checkpoint", error.node, job,
                done + 1, NODE_LOSS_REQUEUES)
    sys.exit(-1)  # as submitit after its own requeue: no result, so the sweep waits for the job's next run


def node_loss_requeues(run_dir: Path, job: str) -> int:
    """How many times Slurm job `job` was requeued for a lost node (its count in the run folder; 0 for a job the
    count is not of: a new submission of the run)."""
    try:
        count = json.loads((Path(run_dir) / NODE_LOSSES).read_text())
        return int(count["requeues"]) if count.get("job") == job else 0
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # none yet, or cut short
        return 0


def _count_node_loss_requeue(run_dir: Path, job: str, requeues: int) -> None:
    path = Path(run_dir) / NODE_LOSSES
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"job": job, "requeues": requeues})
    write_atomically(path, lambda tmp: Path(tmp).write_text(text))
