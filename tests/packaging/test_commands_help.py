"""Every command on PATH answers --help and -h with its keys, their meaning and an example, from the one table the
commands read their keys from (sf_hydra.app.commands), which docs/reference/commands.md is generated from."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sf_hydra.app.commands import COMMANDS, reference
from tests.conftest import REPO_ROOT

# pyproject.toml's [project.scripts] (tomllib is Python 3.11+; the package supports 3.10)
_SECTION = re.search(r"^\[project\.scripts\]\n(.*?)(?=^\[)", (REPO_ROOT / "pyproject.toml").read_text(), re.M | re.S)
SCRIPTS = sorted(re.findall(r"^([\w-]+)\s*=", _SECTION.group(1), re.M))


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_every_command_answers_help(tmp_path, script, flag):
    path = Path(sys.executable).parent / script
    if not path.exists():
        pytest.skip(f"{script} is not installed beside {sys.executable} (pip install . puts it there)")
    done = subprocess.run([str(path), flag], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bad config" not in done.stdout + done.stderr
    if script in COMMANDS:
        for key in COMMANDS[script].keys:
            assert f"  {key.name} " in done.stdout, (key.name, done.stdout)
        assert COMMANDS[script].examples[0] in done.stdout
    assert not list(tmp_path.iterdir()), "--help wrote something"


def test_every_key_value_command_is_in_the_table():
    key_value = {"sf-export", "sf-push", "sf-pull", "sf-import-run"}
    assert key_value == set(COMMANDS) and key_value <= set(SCRIPTS)


def test_the_commands_reference_is_the_generators_output():
    assert (REPO_ROOT / "docs" / "reference" / "commands.md").read_text() == reference()
