"""Checkpoint faults: a truncated or corrupt last.ckpt (resume falls back to the newest intact checkpoint, or
stops with a framed message), a save that fails (the path and the cause, no traceback), and the leftovers of
an interrupted save (removed at start)."""

import logging
import subprocess

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.core.faults import CheckpointError, CheckpointSaveError
from sf_hydra.core.run_dir import resume_checkpoint
from tests.conftest import make_cfg
from tests.faults.runs import train_py

SMALL = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.batch_size=32")


def _trained(tmp_path, steps: int = 2000, *more):
    return train(make_cfg(tmp_path, *SMALL, f"train_for_env_steps={steps}", *more))


def _truncate(path, keep: float = 0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.slow
def test_checkpoints_load_with_weights_only(tmp_path):
    _trained(tmp_path)
    ckpts = sorted((tmp_path / "test" / "checkpoints").glob("*.ckpt"))
    assert len(ckpts) >= 2
    for path in ckpts:  # only tensors and plain types: no pickled objects needed
        assert torch.load(path, weights_only=True)["sf_hydra"]["env_steps"] >= 2000


@pytest.mark.slow
def test_truncated_last_ckpt_falls_back_to_newest_intact_checkpoint(tmp_path, caplog):
    first = _trained(tmp_path)
    folder = tmp_path / "test" / "checkpoints"
    numbered = sorted(folder.glob("checkpoint_*.ckpt"))[-1]
    _trained(tmp_path, 3000)  # a newer save: last.ckpt is its numbered file under a second name (a hard link)
    newest = sorted(folder.glob("checkpoint_*.ckpt"))[-1]
    assert newest != numbered and (folder / "last.ckpt").stat().st_ino == newest.stat().st_ino
    _truncate(folder / "last.ckpt")  # in place: both names of the newest checkpoint are damaged
    caplog.set_level(logging.INFO, logger="sf_hydra")
    second = _trained(tmp_path, 4000)
    text = caplog.text
    assert f"checkpoint {folder / 'last.ckpt'} is unreadable" in text, text
    assert f"checkpoint {newest} is unreadable" in text, text
    assert f"resuming from {numbered} instead" in text and f"{first['env_steps']} env steps" in text, text
    assert second["env_steps"] >= 4000 and second["policy_version"] > first["policy_version"]
    assert torch.load(folder / "last.ckpt", weights_only=True)["sf_hydra"]["env_steps"] == second["env_steps"]


@pytest.mark.slow
def test_a_copy_of_last_ckpt_alone_damaged_falls_back_to_the_numbered_one(tmp_path, caplog):
    """last.ckpt as a file of its own (a copied run folder, or a file system without hard links)."""
    first = _trained(tmp_path)
    folder = tmp_path / "test" / "checkpoints"
    numbered = sorted(folder.glob("checkpoint_*.ckpt"))[-1]
    data = (folder / "last.ckpt").read_bytes()
    (folder / "last.ckpt").unlink()
    (folder / "last.ckpt").write_bytes(data[: len(data) // 2])
    caplog.set_level(logging.INFO, logger="sf_hydra")
    second = _trained(tmp_path, 4000)
    assert f"resuming from {numbered} instead" in caplog.text and f"{first['env_steps']} env steps" in caplog.text
    assert second["env_steps"] >= 4000


@pytest.mark.slow
def test_no_intact_checkpoint_stops_with_what_was_found(tmp_path):
    _trained(tmp_path)
    folder = tmp_path / "test" / "checkpoints"
    found = sorted(p.name for p in folder.glob("*.ckpt"))
    for path in folder.glob("*.ckpt"):
        _truncate(path, 0.3)
    (folder / "checkpoint_000000000016.ckpt").write_text("not a checkpoint")
    with pytest.raises(CheckpointError) as info:
        resume_checkpoint(tmp_path / "test")
    msg = str(info.value)
    for name in found + ["checkpoint_000000000016.ckpt"]:
        assert name in msg, msg
    assert "restart_behavior=restart" in msg


@pytest.mark.slow
def test_no_intact_checkpoint_is_one_framed_line_from_train_py(tmp_path):
    folder = tmp_path / "run" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "last.ckpt").write_bytes(b"PK\x03\x04 truncated zip")
    proc = train_py(tmp_path)
    assert proc.returncode == 1, proc.out
    assert "no checkpoint in" in proc.out and "last.ckpt (" in proc.out, proc.out
    assert "Traceback" not in proc.out and "Error executing job" not in proc.out, proc.out


@pytest.mark.slow
def test_leftover_tmp_files_are_removed_at_start(tmp_path, caplog):
    folder = tmp_path / "test" / "checkpoints"
    folder.mkdir(parents=True)
    leftovers = [folder / "checkpoint_000000001024.ckpt.tmp", folder / "last.ckpt.tmp"]
    for path in leftovers:
        path.write_bytes(b"half a checkpoint")
    caplog.set_level(logging.INFO, logger="sf_hydra")
    _trained(tmp_path)
    assert not any(p.exists() for p in leftovers)
    assert not list(folder.glob("*.tmp"))
    assert f"removing {leftovers[0]}" in caplog.text


@pytest.mark.slow
def test_unwritable_checkpoint_folder_names_the_path_and_cause(tmp_path):
    run = tmp_path / "test"
    run.mkdir()
    (run / "checkpoints").write_text("a file where the checkpoint folder should be")
    with pytest.raises(CheckpointSaveError) as info:
        _trained(tmp_path)
    msg = str(info.value)
    assert f"could not save checkpoint {run / 'checkpoints'}/checkpoint_" in msg and "File exists" in msg, msg


@pytest.fixture
def full_disk(tmp_path):
    """A 64 kB tmpfs mounted where the run's checkpoints go (a checkpoint is ~70 kB): the first save fills it.
    Needs the right to mount (root in a container that allows it); skipped otherwise."""
    folder = tmp_path / "run" / "checkpoints"
    folder.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.slow
def test_disk_full_while_saving_is_one_framed_line(tmp_path, full_disk):
    proc = train_py(tmp_path)
    out = proc.out
    assert proc.returncode == 1, out
    assert f"could not save checkpoint {full_disk}/checkpoint_" in out and "No space left on device" in out, out
    assert "Traceback" not in out and "Error executing job" not in out, out
    assert not list(full_disk.glob("*.tmp"))  # the partial file is removed
