"""What train.py's task function returns to a Hydra sweeper (`sweep_objective`): a number to maximize,
read from the run's summary (sf_hydra.app.train.write_summary)."""

from __future__ import annotations

import math
from typing import Optional

# A run that did not reach train_until_avg_return scores at most -UNREACHED_SECONDS: below every run that
# reached it in less training time than that (11.6 days).
UNREACHED_SECONDS = 1e6
TARGET_STOP = "train_until_avg_return="  # how StopConditions' stop reason (and the evaluator's) starts


def reached_target(summary: dict) -> bool:
    """Whether train_until_avg_return stopped the run (by its training window or by an evaluation)."""
    return str(summary.get("stop_reason") or "").startswith(TARGET_STOP)


def sweep_score(summary: dict, objective: str, target: Optional[float]) -> float:
    """The run's score for `objective` (a SweepObjective) from its summary; -inf when no episode ended.

    avg_return: the final average return. time_to_target: -train_seconds when train_until_avg_return (`target`)
    stopped the run; otherwise -(train_seconds + UNREACHED_SECONDS x (1 + shortfall)), shortfall being how far the
    average return stayed below the target, (target - avg_return) / max(|target|, 1), or 0 above it. The score
    falls with the seconds and, for a run that did not reach the target, rises with its return."""
    avg_return = summary.get("avg_return")
    if avg_return is None or math.isnan(avg_return):
        return float("-inf")
    if str(objective) == "avg_return":
        return float(avg_return)
    if str(objective) != "time_to_target":
        raise ValueError(f"unknown sweep objective {objective!r}")
    seconds = float(summary["train_seconds"])
    if reached_target(summary):
        return -seconds
    shortfall = max(0.0, (target - avg_return) / max(abs(target), 1.0))
    return -(seconds + UNREACHED_SECONDS * (1.0 + shortfall))
