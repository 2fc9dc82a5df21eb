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
from typing import Mapping, Optional, Sequence, Tuple

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


NO_BUDGET = 1e10  # the schema's default of train_for_env_steps and train_for_seconds: a budget this large is none


def step_budget(train_for_env_steps: Optional[float]) -> Optional[int]:
    """The env-step budget of each policy (its own env steps), or None when there is none (None or >= NO_BUDGET)."""
    if train_for_env_steps is None or train_for_env_steps >= NO_BUDGET:
        return None
    return int(train_for_env_steps)


@dataclass(frozen=True)
class Eta:
    """Seconds until the budget that stops the run first, and that budget as the progress line names it."""

    seconds: float
    budget: str  # "train_for_seconds=600", "480000 env steps" or "480000 env steps per policy"


def first_budget_eta(least_steps: int, budget_steps: Optional[int], least_fps: float, train_seconds: float,
                     budget_seconds: float, policies: int = 1) -> Optional[Eta]:
    """The ETA of the first budget to end, or None when no budget ends within a year.

    - env steps: each policy trains `budget_steps` of its own, so the run stops when the least-trained policy
      (`least_steps` now, `least_fps` its env steps per second: the rate of the minimum over the policies) gets
      there; none when `budget_steps` is None (no budget) or the rate is not known yet (0);
    - time: `budget_seconds` of training time (summed across resumes) less `train_seconds`; none when
      `budget_seconds` >= NO_BUDGET.
    The budget's name says "per policy" when there are several policies."""
    candidates = []
    if budget_seconds < NO_BUDGET:
        candidates.append(Eta(max(0.0, budget_seconds - train_seconds), f"train_for_seconds={budget_seconds:g}"))
    if budget_steps is not None and least_fps > 0:
        per_policy = " per policy" if policies > 1 else ""
        candidates.append(Eta(max(0.0, (budget_steps - least_steps) / least_fps),
                              f"{budget_steps} env steps{per_policy}"))
    if not candidates:
        return None
    first = min(candidates, key=lambda eta: eta.seconds)
    return first if first.seconds < 365 * 24 * 3600 else None


def lag_over_policies(metrics: Sequence[Mapping[str, float]]) -> Tuple[float, float]:
    """(avg, max) policy lag over every policy's last learner metrics: the mean of their averages and the
    largest of their maxima; policies not trained yet (no `policy_lag/avg`) are left out; (0, 0) when none was."""
    trained = [m for m in metrics if "policy_lag/avg" in m]
    if not trained:
        return 0.0, 0.0
    return (sum(m["policy_lag/avg"] for m in trained) / len(trained),
            max(m.get("policy_lag/max", m["policy_lag/avg"]) for m in trained))


def least_trained(policy_steps: Sequence[int]) -> Tuple[int, int]:
    """(policy, its env steps) of the policy with the fewest env steps of its own (the lowest index on a tie):
    the one the env-step budget waits for."""
    k = min(range(len(policy_steps)), key=lambda i: policy_steps[i])
    return k, int(policy_steps[k])


def format_duration(seconds: Optional[float]) -> str:
    if seconds is None or math.isnan(seconds):
        return "n/a"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


@dataclass
class ProgressFigures:
    """One moment of a run, as both forms show it. `budget_steps` is each policy's env-step budget (None: no
    budget); `least_policy` and `least_steps` name the least-trained policy and its own env steps (with one
    policy: policy 0, the run's env steps); the lag is over every policy (lag_over_policies)."""

    env_steps: int
    budget_steps: Optional[int]
    fps: dict  # window seconds -> FPS
    avg_return: Optional[float]
    episodes: int
    lag_avg: float
    lag_max: float
    version: int
    eta: Optional[Eta]
    policies: int
    least_policy: int
    least_steps: int

    def least_trained_text(self) -> str:
        """"least-trained policy 2: 240000 of 480000 env steps" with several policies, else ""."""
        if self.policies <= 1:
            return ""
        of = f" of {self.budget_steps}" if self.budget_steps is not None else ""
        return f"least-trained policy {self.least_policy}: {self.least_steps}{of} env steps"

    def eta_text(self) -> str:
        """"ETA 0:03:10 to train_for_seconds=600", or "ETA n/a" when no budget ends within a year."""
        if self.eta is None:
            return "ETA n/a"
        return f"ETA {format_duration(self.eta.seconds)} to {self.eta.budget}"

    def line(self) -> str:
        """`env steps N | FPS ...` first: scripts and tests read those two fields by that pattern."""
        fps = " ".join(f"{self.fps[w]:.0f} ({w} s)" for w in FPS_WINDOWS)
        ret = "n/a" if self.avg_return is None else f"{self.avg_return:.2f}"
        least = f"{self.least_trained_text()} | " if self.policies > 1 else ""
        return (f"env steps {self.env_steps} | FPS {fps} | avg return {ret} ({self.episodes} episodes) | "
                f"policy lag {self.lag_avg:.1f}/{self.lag_max:.1f} (avg/max) | version {self.version} | "
                f"{least}{self.eta_text()}")

    def postfix(self) -> str:
        fps = "/".join(f"{self.fps[w]:.0f}" for w in FPS_WINDOWS)
        ret = "n/a" if self.avg_return is None else f"{self.avg_return:.2f}"
        least = f" | least-trained policy {self.least_policy}" if self.policies > 1 else ""
        return (f"FPS {fps} (10/60/300 s) | return {ret} | lag {self.lag_avg:.1f}/{self.lag_max:.1f} | "
                f"v{self.version}{least} | {self.eta_text()}")


def wants_bar(style: str, stream=None) -> bool:
    """auto: a bar when the console is a terminal."""
    stream = sys.stdout if stream is None else stream
    return str(style) == "bar" or (str(style) == "auto" and hasattr(stream, "isatty") and stream.isatty())


class ConsoleBar:
    """A tqdm bar on the terminal for the run's lifetime: the least-trained policy's own env steps (with one
    policy, the run's) of each policy's budget `budget_steps` (the env-step budget stops the run when that
    policy reaches it). The root logger's console handlers are wrapped so that a log record clears the bar,
    prints, and redraws it; progress records (PROGRESS) skip the console."""

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
        if self.bar.total is not None and figures.least_steps > self.bar.total:
            self.bar.total = figures.least_steps  # the last iteration overshoots the budget: a full bar
        self.bar.n = figures.least_steps
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
