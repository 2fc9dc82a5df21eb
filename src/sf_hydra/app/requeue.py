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
preemption) and exits without a result, up to NODE_LOSS_REQUEUES times per job; Slurm runs it again once it
has the nodes (after its requeue hold), and the run resumes from its last checkpoint.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

from sf_hydra.core import signals
from sf_hydra.core.faults import NodeLost

log = logging.getLogger("sf_hydra")
NODE_LOSS_REQUEUES = 3  # a job's requeues (of all causes, SLURM_RESTART_COUNT) below which a lost node requeues it


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
        requeue_after_node_loss(getattr(result, "_return_value", None))  # Hydra's JobReturn: the run's error
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


def requeue_after_node_loss(error) -> None:
    """When the run ended with a lost node (`error` is NodeLost, raised by rank 0) and the job was requeued fewer
    than NODE_LOSS_REQUEUES times: requeues it and exits without a result (the sweep keeps waiting for the job,
    as after a preemption); else returns, and the job reports the error."""
    if not isinstance(error, NodeLost):
        return
    job, restarts = os.environ.get("SLURM_JOB_ID"), int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    if job is None:
        return
    if restarts >= NODE_LOSS_REQUEUES:
        log.error("node %s was lost; job %s is not requeued: it was requeued %d times already", error.node, job,
                  restarts)
        return
    try:
        subprocess.run(["scontrol", "requeue", job], check=True, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        log.error("node %s was lost; requeueing job %s failed (%s)", error.node, job,
                  getattr(e, "stderr", None) or e)
        return
    log.warning("node %s was lost: job %s requeued (%d of at most %d requeues for lost nodes); it runs again once "
                "Slurm has its nodes back and resumes from the run's last checkpoint", error.node, job,
                restarts + 1, NODE_LOSS_REQUEUES)
    sys.exit(-1)  # as submitit after its own requeue: no result, so the sweep waits for the job's next run
