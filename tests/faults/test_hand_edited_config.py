"""A run folder whose config.yaml was hand-edited into something that is not YAML (or not a mapping) gets one framed
line from every command that reads it, exit status 2, naming the file and what to do: enjoy, sf-export, sf-push,
Policy.load and a resume. Before, enjoy, export and push stopped with a raw ParserError traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from sf_hydra.config import ConfigError
from sf_hydra.evaluation.policy import Policy
from tests.conftest import FAST_OVERRIDES, REPO_ROOT
from tests.faults.runs import env_with_repo

BROKEN = {"not yaml": "model: [unclosed\n", "not a mapping": "- just\n- a list\n"}


@pytest.fixture(scope="module")
def trained(short_cartpole_run):
    """The session's short CartPole run (tests/conftest.py); each case copies it, never changes it."""
    return short_cartpole_run[0] / "test"


def broken_copy(trained, tmp_path, text: str):
    run = tmp_path / "train_dir" / "test"
    shutil.copytree(trained, run)
    (run / "config.yaml").write_text(text)
    return run


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(BROKEN))
def test_policy_load_names_the_file(trained, tmp_path, how):
    run = broken_copy(trained, tmp_path, BROKEN[how])
    with pytest.raises(ConfigError) as refused:
        Policy.load(run)
    assert refused.value.key == "config.yaml" and refused.value.value == str(run / "config.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["enjoy", "export", "push", "resume"])
def test_every_command_says_it_in_one_line_with_exit_2(trained, tmp_path, command):
    if command == "push":
        pytest.importorskip("safetensors", reason="the hub extra (safetensors, huggingface_hub) is not installed")
        pytest.importorskip("huggingface_hub", reason="the hub extra (safetensors, huggingface_hub) is not installed")
    run = broken_copy(trained, tmp_path, BROKEN["not yaml"])
    argv = {"enjoy": [str(REPO_ROOT / "enjoy.py"), f"run_dir={run}", "episodes=1"],
            "export": ["-m", "sf_hydra.app.export_command", f"run_dir={run}", "format=torchscript"],
            "push": ["-m", "sf_hydra.app.hub", "push", f"run_dir={run}", f"local_dir={tmp_path / 'repo'}"],
            "resume": [str(REPO_ROOT / "train.py"), f"train_dir={run.parent}", "experiment=test", *FAST_OVERRIDES,
                       "train_for_env_steps=6000"]}[command]
    done = subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=env_with_repo())
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-2000:]
    lines = [line for line in out.splitlines() if "bad config: config.yaml=" in line]
    assert len(lines) == 1 and str(run / "config.yaml") in lines[0], out[-2000:]
    assert "Traceback" not in out and not (tmp_path / "repo").exists()
