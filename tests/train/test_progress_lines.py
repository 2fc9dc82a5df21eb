"""The console progress lines: FPS is never 0 once env steps were made (even when the first batch took
longer than the FPS window, as a slow env start-up does), and the last line is printed once."""

from __future__ import annotations

import re

from sf_hydra.learner.callbacks import Summaries
from tests.faults.runs import train_py

LINE = re.compile(r"env steps (\d+) \| FPS (\d+)")


def test_fps_spans_the_window_even_when_the_first_batch_came_late():
    s = Summaries(log_interval_sec=1, summaries_interval=10)
    s.history.extend([(100.0, 0), (125.0, 5000)])  # training started at t=100; the first batch 25 s later
    assert s.fps() == 5000 / 25
    s.history.extend([(130.0, 6000), (134.0, 7000), (136.0, 8000)])
    assert s.fps() == (8000 - 5000) / (136 - 125)  # from the newest point at least 10 s old
    s.history.clear()
    s.history.extend([(0.0, 0), (2.0, 400), (4.0, 1000)])  # younger than the window: since the start
    assert s.fps() == 1000 / 4


def test_last_progress_line_is_not_repeated(tmp_path):
    proc = train_py(tmp_path, "train_for_env_steps=1000", "logger.log_interval_sec=0.001")  # a line every batch
    assert proc.returncode == 0, proc.out[-3000:]
    lines = [line for line in proc.out.splitlines() if LINE.search(line)]
    assert len(lines) >= 2, proc.out[-3000:]
    steps = [int(LINE.search(line).group(1)) for line in lines]
    assert len(steps) == len(set(steps)), lines  # no env-step count printed twice
    assert all(int(LINE.search(line).group(2)) > 0 for line in lines), lines
