"""The launch clock: seconds since this process started, for the start-up times a run's profile
records (the sampler's first trajectory, the learner's first update). Stdlib only, so any layer
may read it."""

from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Union

_IMPORTED = time.monotonic()


def seconds_since_launch() -> float:
    """Seconds since this process started (Linux: its start time in /proc, so interpreter start-up
    and imports count); elsewhere, since this module was imported."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: clock ticks after boot
        return time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic() - _IMPORTED


@contextmanager
def said_while_slow(what: Union[str, Callable[[], str]], log: logging.Logger, after_sec: float = 5.0,
                    every_sec: float = 10.0) -> Iterator[None]:
    """Runs the block; once it has lasted `after_sec`, says "still <what> (N s)" every `every_sec` until it ends,
    so that a start-up step that takes long (a Doom env's first build on a loaded machine) never looks hung.
    `what` may be a function, asked each time (how many workers are ready so far)."""
    done, t0 = threading.Event(), time.monotonic()

    def say() -> None:
        wait = after_sec
        while not done.wait(wait):
            log.info("still %s (%.0f s)", what() if callable(what) else what, time.monotonic() - t0)
            wait = every_sec

    thread = threading.Thread(target=say, name="said-while-slow", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
