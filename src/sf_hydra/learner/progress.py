"""What a run shows of its progress: FPS over several windows, the ETA, and the console's form of it.

Two forms of the same figures (`logger.progress`):
- lines: a plain line every `logger.log_interval_sec` (log files, pipes, Slurm jobs, as Sample Factory prints);
- bar: on a terminal, one live progress bar (tqdm) instead of those lines on the console. The lines still
  go to the run's log file (train.log): every record is marked `progress` and only the console skips it.
"""

from __future__ import annotations

import logging
import math
import sys
from collections import deque
from dataclasses import dataclass
from typing import Optional

from tqdm import tqdm

FPS_WINDOWS = (10, 60, 300)  # seconds, as Sample Factory reports its FPS
PROGRESS = {"progress": True}  # `extra` of a progress line's log record: the bar's console skips it


class FpsMeter:
    """Env steps over time, for the FPS of any recent window. Points closer than `resolution` seconds
    replace each other (the newest stays exact), so `maxlen` points span at least maxlen x resolution
    seconds: the longest window is covered however often the learner reports."""

    def __init__(self, resolution: float = 0.25, maxlen: int = 1500):
        self.resolution = resolution
        self.history: deque = deque(maxlen=maxlen)  # (time, env_steps)

    def add(self, now: float, env_steps: int) -> None:
        if len(self.history) >= 2 and now - self.history[-2][0] < self.resolution:
            self.history[-1] = (now, env_steps)
        else:
            self.history.append((now, env_steps))

    def fps(self, window_sec: float = 10.0) -> float:
        """Env steps per second from the newest point at least `window_sec` old (the oldest point when
        none is that old: the whole run so far) to the newest one."""
        if not self.history:
            return 0.0
        now, steps = self.history[-1]
        old_time, old_steps = self.history[0]
        for t, s in self.history:
            if now - t < window_sec:
                break
            old_time, old_steps = t, s
        return (steps - old_steps) / (now - old_time) if now > old_time else 0.0


def eta_seconds(env_steps: int, budget_steps: float, fps: float, train_seconds: float,
                budget_seconds: float) -> Optional[float]:
    """Seconds until the first budget ends: the env-step budget at the current FPS, or the time budget.
    None when neither ends within a year (the schema's defaults mean "no budget")."""
    candidates = [budget_seconds - train_seconds]
    if fps > 0:
        candidates.append((budget_steps - env_steps) / fps)
    eta = max(0.0, min(candidates))
    return eta if eta < 365 * 24 * 3600 else None


def format_duration(seconds: Optional[float]) -> str:
    if seconds is None or math.isnan(seconds):
        return "n/a"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


@dataclass
class ProgressFigures:
    """One moment of a run, as both forms show it."""

    env_steps: int
    budget_steps: Optional[int]  # None: no env-step budget
    fps: dict  # window seconds -> FPS
    avg_return: Optional[float]
    episodes: int
    lag_avg: float
    lag_max: float
    version: int
    eta: Optional[float]

    def line(self) -> str:
        """`env steps N | FPS ...` first: scripts and tests read those two fields by that pattern."""
        budget = f" to {self.budget_steps} env steps" if self.budget_steps is not None else ""
        fps = " ".join(f"{self.fps[w]:.0f} ({w} s)" for w in FPS_WINDOWS)
        ret = "n/a" if self.avg_return is None else f"{self.avg_return:.2f}"
        return (f"env steps {self.env_steps} | FPS {fps} | avg return {ret} ({self.episodes} episodes) | "
                f"policy lag {self.lag_avg:.1f}/{self.lag_max:.1f} (avg/max) | version {self.version} | "
                f"ETA {format_duration(self.eta)}{budget}")

    def postfix(self) -> str:
        fps = "/".join(f"{self.fps[w]:.0f}" for w in FPS_WINDOWS)
        ret = "n/a" if self.avg_return is None else f"{self.avg_return:.2f}"
        return (f"FPS {fps} (10/60/300 s) | return {ret} | lag {self.lag_avg:.1f}/{self.lag_max:.1f} | "
                f"v{self.version} | ETA {format_duration(self.eta)}")


def wants_bar(style: str, stream=None) -> bool:
    """auto: a bar when the console is a terminal."""
    stream = sys.stdout if stream is None else stream
    return str(style) == "bar" or (str(style) == "auto" and hasattr(stream, "isatty") and stream.isatty())


class ConsoleBar:
    """A tqdm bar on the terminal for the run's lifetime. The root logger's console handlers are wrapped so
    that a log record clears the bar, prints, and redraws it; progress records (PROGRESS) skip the console."""

    def __init__(self, budget_steps: Optional[int], initial_steps: int, stream=None):
        self.stream = sys.stdout if stream is None else stream
        self.bar = tqdm(total=budget_steps, initial=initial_steps, unit="frame", unit_scale=True,
                        file=self.stream, dynamic_ncols=True, mininterval=0, smoothing=0,
                        bar_format="{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} frames [{elapsed}]{postfix}"
                        if budget_steps else "{n_fmt} frames [{elapsed}]{postfix}")
        self.wrapped = []
        root = logging.getLogger()
        for i, handler in enumerate(root.handlers):
            if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) in (
                    sys.stdout, sys.stderr, self.stream):
                wrapper = _BarAwareHandler(handler, self.bar)
                root.handlers[i] = wrapper
                self.wrapped.append((i, handler, wrapper))

    def show(self, figures: ProgressFigures) -> None:
        if self.bar.total is not None and figures.env_steps > self.bar.total:
            self.bar.total = figures.env_steps  # the last iteration overshoots the budget: a full bar
        self.bar.n = figures.env_steps
        self.bar.set_postfix_str(figures.postfix(), refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        root = logging.getLogger()
        for i, handler, wrapper in self.wrapped:
            if i < len(root.handlers) and root.handlers[i] is wrapper:
                root.handlers[i] = handler
        self.wrapped = []
        self.bar.close()


class _BarAwareHandler(logging.Handler):
    def __init__(self, inner: logging.Handler, bar):
        super().__init__(inner.level)
        self.inner, self.bar = inner, bar

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "progress", False):
            return
        self.bar.clear()
        self.inner.handle(record)
        self.bar.refresh()
