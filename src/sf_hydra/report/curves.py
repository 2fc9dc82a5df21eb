"""Learning curves from TensorBoard event files, and their mean +- std over seeds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from sf_hydra.report.tensorboard import read_scalars

DEFAULT_TAG = "episode/return"


@dataclass
class Curve:
    steps: np.ndarray  # env steps (frames)
    values: np.ndarray


def read_curve(run_dir: Path, tag: str = DEFAULT_TAG) -> Optional[Curve]:
    """One scalar series of a run (None when the run never wrote it, e.g. no episode ended)."""
    events = read_scalars(run_dir).get(tag)
    if not events:
        return None
    # A resumed run can log a step twice: keep the latest value per step.
    by_step = {e.step: e.value for e in sorted(events, key=lambda e: (e.step, e.wall_time))}
    steps = np.array(sorted(by_step), dtype=np.float64)
    return Curve(steps, np.array([by_step[s] for s in sorted(by_step)], dtype=np.float64))


def mean_std(curves: List[Curve], points: int = 200) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and std over seeds on a shared step grid, up to the step every seed has reached
    (so the band never averages over seeds that stopped early)."""
    start = max(c.steps[0] for c in curves)
    end = min(c.steps[-1] for c in curves)
    grid = np.linspace(start, end, points) if end > start else np.array([end])
    stacked = np.stack([np.interp(grid, c.steps, c.values) for c in curves])
    return grid, stacked.mean(axis=0), stacked.std(axis=0)
