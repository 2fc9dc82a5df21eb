"""The console progress: lines where the console is a file or a pipe (FPS is never 0 once env steps were
made, even when the first batch took longer than the FPS window, as a slow env start-up does; the last line
is printed once), a live bar on a terminal (the lines then go to the log file only), FPS over Sample
Factory's 10/60/300-second windows and an ETA that names its budget (with several policies, each policy's
env-step budget and the least-trained policy; train_for_seconds when it is the budget)."""

from __future__ import annotations

import logging
import re
import sys

import pytest

from sf_hydra.app.train import train
from sf_hydra.learner.callbacks import Summaries
from sf_hydra.learner.progress import FpsMeter, format_duration
from tests.conftest import make_cfg
from tests.faults.runs import REPO, TINY, env_with_repo, train_py
from tests.helpers.terminal import run_on_terminal

LINE = re.compile(r"env steps (\d+) \| FPS (\d+)")


def test_fps_spans_the_window_even_when_the_first_batch_came_late():
    s = Summaries({"log_interval_sec": 1, "experiment_summaries_interval": 10, "progress": "lines"})
    s.history.extend([(100.0, 0), (125.0, 5000)])  # training started at t=100; the first batch 25 s later
    assert s.fps() == 5000 / 25
    s.history.extend([(130.0, 6000), (134.0, 7000), (136.0, 8000)])
    assert s.fps() == (8000 - 5000) / (136 - 125)  # from the newest point at least 10 s old
    s.history.clear()
    s.history.extend([(0.0, 0), (2.0, 400), (4.0, 1000)])  # younger than the window: since the start
    assert s.fps() == 1000 / 4


@pytest.mark.slow
def test_last_progress_line_is_not_repeated(tmp_path):
    proc = train_py(tmp_path, "train_for_env_steps=1000", "logger.log_interval_sec=0.001")  # a line every batch
    assert proc.returncode == 0, proc.out[-3000:]
    lines = [line for line in proc.out.splitlines() if LINE.search(line)]
    assert len(lines) >= 2, proc.out[-3000:]
    steps = [int(LINE.search(line).group(1)) for line in lines]
    assert len(steps) == len(set(steps)), lines  # no env-step count printed twice
    assert all(int(LINE.search(line).group(2)) > 0 for line in lines), lines


def test_fps_windows_reach_back_300_seconds_however_often_the_learner_reports():
    meter = FpsMeter()
    for i in range(40_000):  # 400 s of a learner reporting every 10 ms, at 1000 env steps/s then 3000
        t = i * 0.01
        meter.add(t, int(1000 * t) if t <= 200 else 200_000 + int(3000 * (t - 200)))
    assert len(meter.history) <= meter.history.maxlen
    assert abs(meter.fps(10) - 3000) < 5 and abs(meter.fps(60) - 3000) < 5
    assert abs(meter.fps(300) - (200 * 3000 + 100 * 1000) / 300) < 10  # half of the window at each rate


def test_format_duration():
    assert format_duration(3725) == "1:02:05" and format_duration(None) == "n/a"


def _progress_lines(caplog) -> list:
    return [r.getMessage() for r in caplog.records if LINE.search(r.getMessage())]


@pytest.mark.slow
def test_two_policies_show_the_least_trained_and_the_per_policy_budget(tmp_path, caplog):
    """A real 2-policy run: each line names the least-trained policy's own env steps of the budget each policy
    trains for, and the ETA that budget (the run's env steps pass it: they count both policies)."""
    caplog.set_level(logging.INFO, logger="sf_hydra")
    summary = train(make_cfg(tmp_path, "algo.num_policies=2", "train_for_env_steps=3000",
                             "logger.log_interval_sec=0.001"))
    lines = _progress_lines(caplog)
    assert len(lines) >= 2, lines
    least = re.compile(r"least-trained policy ([01]): (\d+) of 3000 env steps \| "
                       r"ETA (n/a|\d+:\d\d:\d\d to 3000 env steps per policy)$")
    assert all(least.search(line) for line in lines), lines  # n/a: the least-trained policy has no rate yet
    last = least.search(lines[-1])
    assert last.group(3) == "0:00:00 to 3000 env steps per policy", lines[-1]
    steps = [p["env_steps"] for p in summary["policies"]]
    assert int(last.group(2)) == min(steps) >= 3000 and int(last.group(1)) == steps.index(min(steps)), (lines, steps)
    assert int(LINE.search(lines[-1]).group(1)) == summary["env_steps"] > 3000  # the run's steps: both policies'


@pytest.mark.slow
def test_a_time_budget_names_itself_in_the_eta(tmp_path, caplog):
    """train_for_seconds is the only budget (train_for_env_steps at the schema's 10^10): the ETA is to it."""
    caplog.set_level(logging.INFO, logger="sf_hydra")
    train(make_cfg(tmp_path, "train_for_env_steps=10000000000", "train_for_seconds=4", "logger.log_interval_sec=0.5"))
    lines = _progress_lines(caplog)
    assert lines and all(re.search(r"ETA \d+:\d\d:0[0-4] to train_for_seconds=4$", line) for line in lines), lines
    assert not any("least-trained" in line for line in lines), lines  # one policy


@pytest.mark.slow
def test_a_terminal_gets_a_live_bar_and_the_log_file_the_lines(tmp_path):
    cmd = [sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=run", *TINY,
           "train_for_env_steps=6000", "logger.log_interval_sec=0.1"]  # 6000 steps can take under 0.5 s
    code, screen = run_on_terminal(cmd, cwd=REPO, env=env_with_repo())
    assert code == 0, screen[-3000:]
    bars = [b for b in re.split(r"[\r\n]", screen) if "frames [" in b]
    assert bars and bars[-1].lstrip().startswith("100%|") and "/6.0" in bars[-1], screen[-3000:]
    assert all(key in bars[-1] for key in ("FPS ", "(10/60/300 s)", "return ", "lag ", "ETA 0:00:00")), bars[-1]
    assert not LINE.search(screen), screen[-3000:]  # the bar replaces the lines on the terminal...
    logged = (tmp_path / "run" / "train.log").read_text()
    lines = [line for line in logged.splitlines() if LINE.search(line)]
    assert len(lines) >= 2, logged[-3000:]  # ... which the log file still gets
    assert all("(60 s)" in line and "(300 s)" in line and "to 6000 env steps" in line for line in lines), lines
    assert "stopped (train_for_env_steps=6000 reached)" in screen  # other records still reach the terminal
