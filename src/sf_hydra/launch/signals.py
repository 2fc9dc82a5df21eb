"""The signals that ask a training run to save a checkpoint and stop, and which of them did.

Training (learner/callbacks.py StopConditions) only asks to stop when one arrives; what
happens after the checkpoint is saved depends on the signal, and is decided by whoever
launched the run (launch/requeue.py): Ctrl+C or `kill` end the run, Slurm's preemption /
time-limit signal (sent through submitit) requeues the job, Slurm's SIGTERM (scancel)
leaves the job without a result so that Slurm's own record says what became of it.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Callable, Dict, Optional, Tuple

# submitit's own variables: set in every job it runs, and the signal it asks Slurm to send
# before the time limit (`#SBATCH --signal=USR2@<signal_delay_s>`), USR2 unless set.
SUBMITIT_EXECUTOR_ENV = "SUBMITIT_EXECUTOR"
PREEMPT_SIGNAL_ENV = "SUBMITIT_PREEMPT_SIGNAL"

_received: Optional[signal.Signals] = None
_replaced: Dict[signal.Signals, Any] = {}
_handler: Optional[Callable] = None  # the current run's, between `catch` and `release`
_preemption_held = False  # a launcher hands the preemption signal on after the checkpoint


def preemption_signal() -> Optional[signal.Signals]:
    """The signal that means "preempted or out of time, requeue me" in a submitit job; None
    outside one (there SIGUSR2 keeps its default meaning)."""
    if not os.environ.get(SUBMITIT_EXECUTOR_ENV):
        return None
    return signal.Signals["SIG" + os.environ.get(PREEMPT_SIGNAL_ENV, "USR2")]


def stop_signals() -> Tuple[signal.Signals, ...]:
    """Every signal that asks this process's training run to save and stop."""
    return (signal.SIGINT, signal.SIGTERM) + _held()


def _held() -> Tuple[signal.Signals, ...]:
    preempt = preemption_signal() if _preemption_held else None
    return (preempt,) if preempt else ()


def hold_preemption() -> None:
    """Called by a launcher that hands the preemption signal on to submitit once the run has
    saved its checkpoint (launch/requeue.py); elsewhere submitit keeps handling it itself.
    Training takes the signal, and until it is under way (`admit`) the signal is blocked:
    Slurm signals every process of a job, and SIGUSR2 would kill the processes the learner
    starts (rollout workers, multiprocessing's resource tracker). Started meanwhile, they
    inherit the block, and the learner stops them itself; a signal that comes during
    start-up waits for training to take it. (SIGTERM is not held: Slurm kills the job after
    it anyway.)"""
    global _preemption_held
    _preemption_held = True
    signal.pthread_sigmask(signal.SIG_BLOCK, _held())


def remember_handlers() -> None:
    """Before a run starts: the stop signals' handlers as they are now are the ones `release`
    gives back (not the ones Lightning installs at the start of fit)."""
    for sig in stop_signals():
        _replaced.setdefault(sig, signal.getsignal(sig))


def catch(handler: Callable) -> None:
    """Makes `handler` take every stop signal for a new run (remembering the handlers it
    replaces, e.g. submitit's) and forgets what an earlier run received."""
    global _received, _handler
    _received, _handler = None, handler
    for sig in stop_signals():
        previous = signal.signal(sig, handler)
        _replaced.setdefault(sig, previous)


def hold() -> None:
    """Blocks the stop signals (one that comes waits) while someone else puts handlers back:
    Lightning, at the end of fit, restores every handler it found when fit began, and the
    run still has its final checkpoint to save. `catch_again` lets them in again."""
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals())


def catch_again() -> None:
    """The current run's handler takes the stop signals again (after `hold`), keeping what
    was received so far; a signal that waited meanwhile is taken now."""
    if _handler is not None:
        for sig in stop_signals():
            _replaced.setdefault(sig, signal.signal(sig, _handler))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals())


def admit() -> None:
    """Lets a held signal in: training runs, and every process it needs has started."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _held())


def release() -> None:
    """Gives the stop signals back to the handlers `catch` replaced, and lets in one still
    held (again: a no-op)."""
    global _handler
    _handler = None
    while _replaced:
        sig, previous = _replaced.popitem()
        signal.signal(sig, previous)
    admit()


def record(signum: int) -> None:
    """Notes the first stop signal of the current run."""
    global _received
    if _received is None:
        _received = signal.Signals(signum)


def received() -> Optional[signal.Signals]:
    """The stop signal that ended the current run, if one did."""
    return _received
