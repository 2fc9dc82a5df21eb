"""Which file a resume starts from: the newest learner state that loads, whichever of last.ckpt, a numbered
checkpoint, a milestone or a best checkpoint holds it, said when it is not last.ckpt."""

import logging
import os

import pytest
import torch

from sf_hydra.core.faults import CheckpointError
from sf_hydra.core.run_dir import SAVED_AT_KEY, resume_checkpoint


def _state(path, env_steps: int, saved_at=None, mtime=None):
    """A learner state as the learner writes one (only what the choice reads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"sf_hydra": {"env_steps": env_steps}, "state_dict": {"w": torch.zeros(3)}}
    if saved_at is not None:
        state[SAVED_AT_KEY] = saved_at
    torch.save(state, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_a_best_checkpoint_newer_than_last_ckpt_is_chosen_and_said(tmp_path, caplog):
    """The issue's run: a stop that never reached its final save left last.ckpt from an earlier session
    (27,648 steps) and best_p0.ckpt from this one (1.156M)."""
    folder = tmp_path / "checkpoints"
    _state(folder / "checkpoint_000000027648.ckpt", 27_648, saved_at=1_000.0)
    os.link(folder / "checkpoint_000000027648.ckpt", folder / "last.ckpt")
    best = _state(folder / "best_p0.ckpt", 1_156_000, saved_at=5_000.0)
    caplog.set_level(logging.INFO, logger="sf_hydra")
    assert resume_checkpoint(tmp_path) == best
    assert "resuming from" in caplog.text and "best_p0.ckpt (1156000 env steps" in caplog.text, caplog.text
    assert "newer learner state than last.ckpt (27648 env steps" in caplog.text, caplog.text


def test_last_ckpt_wins_over_its_own_numbered_file_and_older_states(tmp_path, caplog):
    folder = tmp_path / "checkpoints"
    _state(folder / "best_p0.ckpt", 900, saved_at=1_999.0)  # checked just before the periodic save
    _state(folder / "milestones" / "checkpoint_000000000500.ckpt", 500, saved_at=1_500.0)
    _state(folder / "checkpoint_000000001000.ckpt", 1_000, saved_at=2_000.0)
    os.link(folder / "checkpoint_000000001000.ckpt", folder / "last.ckpt")
    caplog.set_level(logging.INFO, logger="sf_hydra")
    assert resume_checkpoint(tmp_path) == folder / "last.ckpt"
    assert "resuming from" not in caplog.text  # train.py says "resuming from last.ckpt"


def test_a_milestone_newer_than_last_ckpt_is_chosen(tmp_path):
    folder = tmp_path / "checkpoints"
    _state(folder / "last.ckpt", 1_000, saved_at=2_000.0)
    newest = _state(folder / "milestones" / "checkpoint_000000003000.ckpt", 3_000, saved_at=3_000.0)
    assert resume_checkpoint(tmp_path) == newest


def test_a_run_resumed_from_an_earlier_state_goes_on_from_its_newest_save_not_its_most_steps(tmp_path):
    """load_checkpoint_kind=best once took a run back to fewer env steps: what it saved since is newer than the
    abandoned branch's larger step count."""
    folder = tmp_path / "checkpoints"
    _state(folder / "checkpoint_000001000000.ckpt", 1_000_000, saved_at=1_000.0)
    newest = _state(folder / "checkpoint_000000600000.ckpt", 600_000, saved_at=2_000.0)
    assert resume_checkpoint(tmp_path) == newest


def test_checkpoints_without_a_saved_time_are_ordered_by_their_files_times(tmp_path):
    """Checkpoints written before the learner recorded `saved_at`."""
    folder = tmp_path / "checkpoints"
    _state(folder / "last.ckpt", 1_000, mtime=1_000_000.0)
    best = _state(folder / "best_p0.ckpt", 2_000, mtime=2_000_000.0)
    assert resume_checkpoint(tmp_path) == best


def test_a_damaged_newer_state_is_skipped_and_said(tmp_path, caplog):
    folder = tmp_path / "checkpoints"
    last = _state(folder / "last.ckpt", 1_000, saved_at=1_000.0)
    (folder / "best_p0.ckpt").write_bytes(b"PK\x03\x04 cut short")
    caplog.set_level(logging.INFO, logger="sf_hydra")
    assert resume_checkpoint(tmp_path) == last
    assert f"checkpoint {folder / 'best_p0.ckpt'} is unreadable" in caplog.text


def test_a_best_checkpoint_alone_is_a_run_to_resume(tmp_path):
    """A run killed after its first best checkpoint, before its first periodic one."""
    best = _state(tmp_path / "checkpoints" / "best_p1.ckpt", 4_000, saved_at=1.0)
    assert resume_checkpoint(tmp_path) == best


def test_nothing_loads_names_every_file(tmp_path):
    folder = tmp_path / "checkpoints"
    (folder / "milestones").mkdir(parents=True)
    for name in ("last.ckpt", "best_p0.ckpt", "milestones/checkpoint_000000000016.ckpt"):
        (folder / name).write_text("not a checkpoint")
    with pytest.raises(CheckpointError) as info:
        resume_checkpoint(tmp_path)
    for name in ("last.ckpt", "best_p0.ckpt", "checkpoint_000000000016.ckpt"):
        assert name in str(info.value)
