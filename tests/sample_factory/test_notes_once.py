"""A translated Sample Factory line says each `note:` once, even when it gives a dropped flag twice (as some of
Sample Factory's own README lines repeat a flag)."""

from __future__ import annotations

import subprocess
import sys

from tests.faults.runs import REPO, env_with_repo


def _stderr(script: str, *args: str) -> str:
    return subprocess.run([sys.executable, str(REPO / script), *args], cwd=REPO, env=env_with_repo(),
                          capture_output=True, text=True, timeout=120).stderr


def test_a_flag_given_twice_is_noted_once_by_train_py():
    err = _stderr("train.py", "--env=CartPole-v1", "--use_record_episode_statistics=True",
                  "--use_record_episode_statistics=True", "--cfg", "job")
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == len(set(notes)), err
    assert sum("--use_record_episode_statistics=True: dropped" in n for n in notes) == 1, err


def test_a_flag_given_twice_is_noted_once_by_enjoy_py():
    err = _stderr("enjoy.py", "--env=CartPole-v1", "--no_render", "--no_render", "--help")
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert sum("--no_render=True: dropped" in n for n in notes) == 1, err
