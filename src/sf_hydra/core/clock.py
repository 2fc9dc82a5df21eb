"""The launch clock: seconds since this process started, for the start-up times a run's profile
records (the sampler's first trajectory, the learner's first update). Stdlib only, so any layer
may read it."""

from __future__ import annotations

import os
import time

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
