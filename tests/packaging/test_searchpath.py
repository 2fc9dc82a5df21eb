"""A project's own configs join the packaged ones through `hydra.searchpath`, as a folder (`file://`,
relative to where the command runs) or as an importable package (`pkg://`): its env configs pass the
`env=` check and its presets compose (README, "As a package")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.faults.runs import REPO, env_with_repo


@pytest.fixture
def project(tmp_path):
    conf = tmp_path / "my_project_conf"
    (conf / "env" / "mine").mkdir(parents=True)
    (conf / "experiments").mkdir()
    (conf / "__init__.py").write_text("")  # Hydra reads a pkg:// package only with one
    (conf / "env" / "mine" / "pole.yaml").write_text("defaults:\n  - gym/cartpole\n  - _self_\nname: my_pole\n")
    (conf / "experiments" / "quick.yaml").write_text("# @package _global_\ntrain_for_env_steps: 1234\n")
    return tmp_path


@pytest.mark.parametrize("entry", ["file://my_project_conf", "pkg://my_project_conf"])
def test_own_env_and_preset_through_the_search_path(project, entry):
    env = env_with_repo()
    env["PYTHONPATH"] = os.pathsep.join([str(project), env["PYTHONPATH"]])  # pkg://: the project importable
    proc = subprocess.run([sys.executable, str(REPO / "train.py"), f"hydra.searchpath=[{entry}]", "env=mine/pole",
                           "+experiment=quick", "--cfg", "job", "--resolve"], cwd=project, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["env"]["name"] == "my_pole" and cfg["env"]["id"] == "CartPole-v1", cfg["env"]
    assert cfg["train_for_env_steps"] == 1234


def test_unknown_env_names_the_project_configs(project):
    proc = subprocess.run([sys.executable, str(REPO / "train.py"), "hydra.searchpath=[file://my_project_conf]",
                           "env=mine/polee", "--cfg", "job"], cwd=project, env=env_with_repo(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode == 2 and "mine/pole" in proc.stdout, proc.stdout[-3000:]
