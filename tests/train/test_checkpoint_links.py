"""last.ckpt is the newest numbered checkpoint under a second name (a hard link, one write per save): pruning
the numbered name leaves last.ckpt whole and a resume starts from it; where hard links fail, a copy."""

import errno
import logging
import os

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.learner.checkpointing import link_last
from tests.conftest import make_cfg

SMALL = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.batch_size=32", "keep_checkpoints=1")


def _steps(path) -> int:
    return torch.load(path, map_location="cpu", weights_only=True)["sf_hydra"]["env_steps"]


@pytest.mark.slow
def test_last_ckpt_is_a_link_to_the_newest_and_outlives_its_pruning(tmp_path, caplog):
    first = train(make_cfg(tmp_path, *SMALL, "train_for_env_steps=2000"))
    folder = tmp_path / "test" / "checkpoints"
    last = folder / "last.ckpt"
    (numbered,) = folder.glob("checkpoint_*.ckpt")
    assert last.stat().st_ino == numbered.stat().st_ino and last.stat().st_nlink == 2
    assert not list(folder.glob("*.tmp"))

    second = train(make_cfg(tmp_path, *SMALL, "train_for_env_steps=3000"))
    (newest,) = folder.glob("checkpoint_*.ckpt")  # keep_checkpoints=1 pruned the first one
    assert newest != numbered and not numbered.exists()
    assert last.stat().st_ino == newest.stat().st_ino and _steps(last) == second["env_steps"]

    newest.unlink()  # as the next save's pruning would: last.ckpt is its own name of the file
    assert last.stat().st_nlink == 1 and _steps(last) == second["env_steps"]
    caplog.set_level(logging.INFO, logger="sf_hydra")
    third = train(make_cfg(tmp_path, *SMALL, "train_for_env_steps=4000"))
    assert "resuming from last.ckpt" in caplog.text, caplog.text
    assert third["policy_version"] > second["policy_version"] > first["policy_version"]
    assert third["env_steps"] >= 4000 and _steps(last) == third["env_steps"]


def test_without_hard_links_last_ckpt_is_a_copy(tmp_path, monkeypatch, caplog):
    numbered, last = tmp_path / "checkpoint_000000000100.ckpt", tmp_path / "last.ckpt"
    numbered.write_bytes(b"the checkpoint's bytes")
    last.write_bytes(b"an older checkpoint")

    def refuse(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", refuse)
    caplog.set_level(logging.WARNING, logger="sf_hydra")
    link_last(numbered, last)
    assert last.read_bytes() == numbered.read_bytes() and last.stat().st_ino != numbered.stat().st_ino
    assert "is written as a copy" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([last.name, numbered.name])  # no temporary file left
