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
"""

from __future__ import annotations

import logging
import signal
import sys

from sf_hydra.core import signals

log = logging.getLogger("sf_hydra")


class RequeueAfterCheckpoint:
    """Mixed into one of hydra-submitit-launcher's launchers (hydra_plugins/sf_hydra_plugins,
    where Hydra wants plugins): in the job, a stop signal is acted on only after the run has
    saved its checkpoint."""

    def __call__(self, *args, **kwargs):
        signals.hold_preemption()
        try:
            return super().__call__(*args, **kwargs)
        finally:
            after_stop_signal()


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
