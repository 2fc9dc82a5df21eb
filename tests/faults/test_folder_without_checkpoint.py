"""A run folder that holds a saved config.yaml but no checkpoint (checkpoints/ deleted or emptied): starting anew
there is the user's decision, not a silent one. `restart_behavior=resume` (the default) refuses before anything is
written, naming restart_behavior, the folder and the choices, when a session of that run ended (its summary.json)
or when the config composed now differs from the saved one in what a resume keeps. A run killed before its first
checkpoint and run again with its own command (a Slurm requeue after a lost node) starts anew as before."""

import shutil
import subprocess
import sys

import pytest

from sf_hydra.app.checks import check_run_folder
from sf_hydra.config import ConfigError
from tests.conftest import make_cfg
from tests.faults.runs import REPO, env_with_repo


@pytest.fixture
def emptied(short_cartpole_run, tmp_path):
    """A copy of the shared finished run (train_dir tmp_path, experiment test) without its checkpoints/."""
    train_dir, summary, _ = short_cartpole_run
    shutil.copytree(train_dir / "test", tmp_path / "test")
    shutil.rmtree(tmp_path / "test" / "checkpoints")
    return tmp_path / "test", summary


def _same_command(tmp_path, *overrides):
    """The config the shared run was trained with (short_cartpole_run), then `overrides`."""
    return make_cfg(tmp_path, "train_for_env_steps=3000", *overrides)


@pytest.mark.slow
def test_a_finished_run_whose_checkpoints_were_deleted_is_not_restarted_silently(emptied, tmp_path):
    run, summary = emptied
    with pytest.raises(ConfigError) as refused:
        check_run_folder(_same_command(tmp_path))
    e = refused.value
    assert (e.key, e.value) == ("restart_behavior", "resume")
    message = str(e)
    assert str(run) in message and f"ended at {summary['env_steps']} env steps" in message, message
    assert "restart_behavior=restart" in message and "restart_behavior=overwrite" in message, message
    check_run_folder(_same_command(tmp_path, "restart_behavior=restart"))  # the user's choice: no refusal
    check_run_folder(_same_command(tmp_path, "restart_behavior=overwrite"))


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_starts_anew_with_its_own_config_only(emptied, tmp_path):
    """No summary.json, no checkpoint: the same command (a requeue) starts anew; another config would replace the
    saved one silently and is refused, naming the keys that differ."""
    run, _ = emptied
    (run / "summary.json").unlink()
    check_run_folder(_same_command(tmp_path))
    check_run_folder(_same_command(tmp_path, "hardware.num_workers=1"))  # what a resume may change anyway
    with pytest.raises(ConfigError) as refused:
        check_run_folder(_same_command(tmp_path, "algo.learning_rate=0.007"))
    message = str(refused.value)
    assert refused.value.key == "restart_behavior" and "algo.learning_rate=0.007 (saved: " in message, message


@pytest.mark.slow
def test_train_py_refuses_in_one_framed_line_and_leaves_the_folder_as_it_was(emptied, tmp_path):
    """The issue's trial: a learning rate typed when the run was trained, checkpoints/ deleted, the command run
    again without it: refused (exit 2) before any process starts; config.yaml and tb/ untouched."""
    run, _ = emptied
    before = {p.relative_to(run): p.stat().st_mtime_ns for p in run.rglob("*")}
    saved = (run / "config.yaml").read_text()
    out = subprocess.run([sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=test"],
                         cwd=REPO, env=env_with_repo(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    framed = [line for line in out.stderr.splitlines() if line.startswith("bad config: ")]
    assert len(framed) == 1 and framed[0].startswith("bad config: restart_behavior='resume' is not allowed: "), \
        out.stderr[-2000:]
    assert str(run) in framed[0] and "Traceback" not in out.stderr + out.stdout
    assert (run / "config.yaml").read_text() == saved
    assert {p.relative_to(run): p.stat().st_mtime_ns for p in run.rglob("*")} == before  # nothing written
