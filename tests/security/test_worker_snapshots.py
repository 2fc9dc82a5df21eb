"""hardware.serial_mode's worker snapshots (pickles of the rollout workers' envs, in every checkpoint) are
unpickled on resume only when they carry this user's seal (sf_hydra.core.seal, the key in $SF_HYDRA_HOME):
a tampered, pulled, older or other user's checkpoint has its snapshots dropped with one line, and the run
resumes without them (fresh envs). Every run here has its own SF_HYDRA_HOME: the user's key is untouched."""

import os
import pathlib
import pickle
import shutil
import subprocess
import sys

import pytest
import torch

from sf_hydra.core.run_dir import learner_states
from tests.faults.runs import REPO, TINY, env_with_repo

SERIAL = ("hardware.serial_mode=true", "seed=3")
DROPPED = "resumes without the sampler's state"
CONTINUED = "serial rollout workers continue from the checkpoint"
RESUME_KEY = "sf_hydra_resume_state"


def _train(train_dir, home, *overrides) -> subprocess.CompletedProcess:
    """`python train.py` of a tiny serial CartPole run in `train_dir`, with the seal key in `home`; its output
    (stdout and stderr) in `.stdout`."""
    env = {**env_with_repo(), "SF_HYDRA_HOME": str(home)}
    cmd = [sys.executable, str(REPO / "train.py"), f"train_dir={train_dir}", "experiment=run", *TINY, *SERIAL,
           *overrides]
    return subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180,
                          env=env)


def _resumed(train_dir, home) -> subprocess.CompletedProcess:
    """The same command with a larger budget: the run resumes from its last checkpoint and finishes."""
    proc = _train(train_dir, home, "train_for_env_steps=3000")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "resuming from" in proc.stdout and "train_for_env_steps=3000 reached" in proc.stdout, proc.stdout[-3000:]
    return proc


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory):
    """(train_dir, key folder) of a serial run stopped at its budget, its checkpoints sealed by that key."""
    root = tmp_path_factory.mktemp("serial")
    proc = _train(root / "train", root / "home")
    assert proc.returncode == 0, proc.stdout[-3000:]
    return root / "train", root / "home"


def _copy(serial_run, tmp_path) -> pathlib.Path:
    """A copy of the run's train_dir (each test resumes its own)."""
    return pathlib.Path(shutil.copytree(serial_run[0], tmp_path / "train"))


def _rewrite_checkpoints(train_dir, change) -> None:
    """Each learner state of the run, loaded as plain data, its serial state changed by `change`, saved again."""
    paths = learner_states(train_dir / "run" / "checkpoints")
    assert paths
    for path in paths:
        state = torch.load(path, map_location="cpu", weights_only=True)
        sampler = state[RESUME_KEY]["sampler"]
        assert sampler is not None and sampler["workers"], "the serial run saved no worker snapshot"
        change(sampler)
        torch.save(state, path)


class _Touch:
    """Unpickled, it creates `marker`: what a hostile snapshot would run."""

    def __init__(self, marker):
        self.marker = pathlib.Path(marker)

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


def _dropped_line(proc) -> str:
    lines = [line for line in proc.stdout.splitlines() if DROPPED in line]
    assert len(lines) == 1, proc.stdout[-3000:]
    return lines[0]


@pytest.mark.slow
def test_a_hostile_snapshot_is_never_unpickled_and_the_run_resumes_without_it(serial_run, tmp_path):
    train_dir = _copy(serial_run, tmp_path)
    marker = tmp_path / "marker"
    hostile = torch.frombuffer(bytearray(pickle.dumps(_Touch(marker))), dtype=torch.uint8)
    _rewrite_checkpoints(train_dir, lambda s: s.update(workers=[hostile.clone() for _ in s["workers"]]))
    proc = _resumed(train_dir, serial_run[1])  # the user's own key: the seal kept beside the bytes does not match
    assert not marker.exists(), "a hostile worker snapshot was unpickled on resume"
    assert "last.ckpt" in _dropped_line(proc) and CONTINUED not in proc.stdout


@pytest.mark.slow
def test_a_snapshot_sealed_under_another_key_or_none_is_dropped_and_the_own_key_resumes_it(serial_run, tmp_path):
    own = _resumed(_copy(serial_run, tmp_path / "own"), serial_run[1])
    assert CONTINUED in own.stdout and DROPPED not in own.stdout, own.stdout[-3000:]

    other = _resumed(_copy(serial_run, tmp_path / "other"), tmp_path / "other_home")
    assert "last.ckpt" in _dropped_line(other) and CONTINUED not in other.stdout

    older = _copy(serial_run, tmp_path / "older")  # a checkpoint without seals (older, or its seals stripped)
    _rewrite_checkpoints(older, lambda s: s.pop("seals"))
    unsealed = _resumed(older, serial_run[1])
    assert "last.ckpt" in _dropped_line(unsealed) and CONTINUED not in unsealed.stdout


@pytest.mark.slow
def test_without_a_key_checkpoints_hold_no_snapshot_said_once(tmp_path):
    blocked = tmp_path / "not_a_folder"
    blocked.write_text("")  # the key's folder cannot be made below a file
    proc = _train(tmp_path / "train", blocked / "home", "save_every_sec=1")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert proc.stdout.count("checkpoints hold no rollout worker state") == 1, proc.stdout[-3000:]
    assert str(blocked / "home") in proc.stdout  # the line names where the key could not be made
    # and the run says that its own code will need trusted_targets to load (no sealed record of it)
    assert proc.stdout.count("no seal key could be read or made") == 1, proc.stdout[-3000:]
    assert not (tmp_path / "train" / "run" / "trust.json").exists()
    for path in learner_states(tmp_path / "train" / "run" / "checkpoints"):
        assert torch.load(path, map_location="cpu", weights_only=True)[RESUME_KEY]["sampler"] is None
    assert not os.path.exists(blocked / "home")
