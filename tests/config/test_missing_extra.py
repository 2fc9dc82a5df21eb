"""An env family whose optional extra is not installed: train.py names the missing module, the extra and
both install lines (a checkout, the package), exit 2, before any process starts. The packages are installed
here; tests/helpers/hide_modules.py runs train.py as on an install without them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import tomllib

from sf_hydra.core.extras import EXTRA_OF_MODULE
from sf_hydra.core.faults import EXIT_BAD_CONFIG
from tests.faults.runs import REPO, env_with_repo

CASES = [  # (hidden module, train.py's arguments, the extra, a module the case needs installed to get that far)
    ("cv2", ["env=atari/pong"], "atari", "ale_py"),
    ("mujoco", ["--env=mujoco_ant"], "mujoco", None),  # through the Sample Factory translation
    ("vizdoom", ["env=doom/basic"], "doom", None),
]


def _train_py_without(hidden: str, args, tmp_path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tests.helpers.hide_modules", hidden, str(REPO / "train.py"), *args,
           f"train_dir={tmp_path}" if not args[0].startswith("--") else f"--train_dir={tmp_path}"]
    return subprocess.run(cmd, cwd=REPO, env=env_with_repo(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120)


@pytest.mark.parametrize("hidden,args,extra,needs", CASES, ids=[c[0] for c in CASES])
def test_a_missing_extra_is_named_with_its_install_lines(tmp_path, hidden, args, extra, needs):
    if needs is not None and importlib.util.find_spec(needs) is None:
        pytest.skip(f"{needs} is not installed: the family fails on it first")
    proc = _train_py_without(hidden, args, tmp_path)
    assert proc.returncode == EXIT_BAD_CONFIG, proc.stdout[-3000:]
    assert "env.factory._target_=" in proc.stdout  # the key
    assert f"it needs {hidden}, which is not installed: the {extra} extra installs it" in proc.stdout, proc.stdout
    assert f'pip install -e ".[{extra}]"' in proc.stdout  # a checkout
    assert f'pip install "sf_hydra[{extra}]"' in proc.stdout  # the package
    assert "Are you sure" not in proc.stdout and "Traceback" not in proc.stdout
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_every_extra_named_is_one_pyproject_declares():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRA_OF_MODULE.values()) <= set(declared)
