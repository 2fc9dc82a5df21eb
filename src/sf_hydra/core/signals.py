"""The signals that ask a training run to save a checkpoint and stop, and which of them did.

Training (learner/callbacks.py StopConditions) only asks to stop when one arrives; what
happens after the checkpoint is saved depends on the signal, and is decided by whoever
launched the run (app/requeue.py): Ctrl+C or `kill` end the run, Slurm's preemption /
time-limit signal (sent through submitit) requeues the job, Slurm's SIGTERM (scancel)
leaves the job without a result so that Slurm's own record says what became of it.

A stop signal after the first (`repeat`) aborts at once, without the final checkpoint, except where that
would lose work: within DUPLICATE_SEC of the first it is the same request delivered twice (a terminal's
process group and a launcher that forwards the signal, `timeout`, a multiplexer), while a checkpoint is
being written (`shielded`) the abort waits until the file is on disk, and once training is over
(`finishing`) the final checkpoint is written whatever comes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

# submitit's own variables: set in every job it runs, and the signal it asks Slurm to send
# before the time limit (`#SBATCH --signal=USR2@<signal_delay_s>`), USR2 unless set.
SUBMITIT_EXECUTOR_ENV = "SUBMITIT_EXECUTOR"
PREEMPT_SIGNAL_ENV = "SUBMITIT_PREEMPT_SIGNAL"

log = logging.getLogger("sf_hydra")
_received: Optional[signal.Signals] = None
_replaced: Dict[signal.Signals, Any] = {}
_handler: Optional[Callable] = None  # the current run's, between `catch` and `release`
_preemption_held = False  # a launcher hands the preemption signal on after the checkpoint
DUPLICATE_SEC = 1.0  # a repeat this soon after the first signal is the same request, delivered twice
_first_at: Optional[float] = None  # time.monotonic() of the first stop signal
_shield_depth = 0  # checkpoint saves under way (`shielded`)
_deferred: Optional[Callable[[], None]] = None  # an abort waiting for the save under way
_finishing = False  # training is over: the final checkpoint is being written
_aborted = False  # a repeated signal aborted the run


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
    saved its checkpoint (app/requeue.py); elsewhere submitit keeps handling it itself.
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


def catch(handler: Callable, new_run: bool = True) -> None:
    """Makes `handler` take every stop signal (remembering the handlers it replaces, e.g. submitit's);
    for a `new_run`, forgets what an earlier run received (else the run's handler changes hands: a
    signal received during start-up stays received)."""
    global _received, _handler, _first_at, _deferred, _finishing, _aborted
    if new_run:
        _received, _first_at, _deferred, _finishing, _aborted = None, None, None, False, False
    _handler = handler
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
    global _handler, _deferred, _finishing
    _handler, _deferred, _finishing = None, None, False
    while _replaced:
        sig, previous = _replaced.popitem()
        signal.signal(sig, previous)
    admit()


def record(signum: int) -> None:
    """Notes the first stop signal of the current run."""
    global _received, _first_at
    if _received is None:
        _received, _first_at = signal.Signals(signum), time.monotonic()


def take(sig: signal.Signals, stop: Optional[Callable[[signal.Signals], None]] = None,
         newest_saved: Callable[[], str] = lambda: "no checkpoint was written by this session") -> None:
    """The stop signals' handler, from the start of a run to its final checkpoint. The first signal is
    recorded and `stop(sig)` asks training to stop after its current step (before training runs, None:
    it stops as training starts); a repeat is `repeat`'s to judge, and every outcome is said, an abort
    with `newest_saved()` (what is on disk)."""
    if _received is None:
        record(sig)
        then = (" (preempted or near the time limit: the job is requeued after it)"
                if sig == preemption_signal() else "")
        when = "" if stop is not None else " (during start-up: once training starts)"
        log.warning("received %s: saving a checkpoint and stopping%s%s", sig.name, when, then)
        if stop is not None:
            stop(sig)
        return
    meaning = repeat(lambda: _abort_now(sig, newest_saved))
    if meaning == "duplicate":
        log.info("received %s again within %g s of the first: the same request (one more, later, stops "
                 "without the final checkpoint)", sig.name, DUPLICATE_SEC)
    elif meaning == "finishing":
        log.warning("received %s again: the final checkpoint is being written; the run stops right after it",
                    sig.name)
    elif meaning == "after_save":
        log.warning("received %s again: stopping without the final checkpoint, once the checkpoint being "
                    "written is on disk", sig.name)


def _abort_now(sig: signal.Signals, newest_saved: Callable[[], str]) -> None:
    """Stops the run at once: says what is on disk, then raises KeyboardInterrupt (train.py turns it into
    the exit status of the first signal)."""
    log.warning("received %s again: stopping now, without a final checkpoint; %s", sig.name, newest_saved())
    raise KeyboardInterrupt


def repeat(abort: Callable[[], None]) -> str:
    """What a stop signal after the first means now; `abort` (which stops the run at once, e.g. by raising
    KeyboardInterrupt) runs now or once the save under way is done. Returns "duplicate" (within DUPLICATE_SEC
    of the first: ignored), "finishing" (the final checkpoint is being written: ignored), "after_save" (the
    abort waits for the checkpoint being written) or "abort" (`abort` ran; it returned)."""
    global _deferred
    if _first_at is not None and time.monotonic() - _first_at < DUPLICATE_SEC:
        return "duplicate"
    if _finishing:
        return "finishing"
    if _shield_depth > 0:
        _deferred = abort
        return "after_save"
    _abort(abort)
    return "abort"


def _abort(abort: Callable[[], None]) -> None:
    global _aborted
    _aborted = True
    abort()


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Around a checkpoint save: a repeated stop signal meanwhile aborts the run only once the file is
    written (`repeat`). Nested saves (the best checkpoint checked before a periodic one) count once."""
    global _shield_depth, _deferred
    _shield_depth += 1
    try:
        yield
    finally:
        _shield_depth -= 1
    if _shield_depth == 0 and _deferred is not None:
        abort, _deferred = _deferred, None
        _abort(abort)


def finishing() -> None:
    """Training is over and the final checkpoint comes next: from now on a repeated stop signal is noted,
    not obeyed (an abort waiting for a save is dropped: that save and the final one complete)."""
    global _finishing, _deferred
    _finishing, _deferred = True, None


def aborted() -> bool:
    """Whether a repeated stop signal aborted the current run (no final checkpoint)."""
    return _aborted


def received() -> Optional[signal.Signals]:
    """The stop signal that ended the current run, if one did."""
    return _received
