"""README.md's "Use" commands, run as written (in the venv the tests run in: CI's is fresh, installed by
.ci/run as README's "Set up" says) with budgets cut and runs in a temporary train_dir, so the README
cannot drift from what works. A command whose env family's extra is missing is skipped."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.runs import env_with_repo

REPO = Path(__file__).resolve().parents[2]
CUT = {  # appended to each command of its kind: a short budget, a short play
    "train.py": ("train_for_env_steps=3000", "logger.log_interval_sec=1"),
    "enjoy.py": ("episodes=1", "max_episode_steps=30"),
}
EXTRAS = {"env=doom/": "vizdoom", "video=true": "pygame"}  # a command's text -> the module it needs

pytestmark = pytest.mark.slow


def use_commands() -> list:
    """The commands of the first bash block under '## Use', comments dropped."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Use\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_use_block_is_found():
    commands = use_commands()
    assert len(commands) >= 8 and commands[0] == "python train.py", commands
    assert any(c.startswith("python enjoy.py") for c in commands)


@pytest.fixture(scope="module")
def train_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("readme_runs")


@pytest.mark.parametrize("command", use_commands())
def test_readme_use_command_works(command, train_dir):
    args = shlex.split(command)
    assert args[0] == "python" and args[1] in CUT, f"README's Use block has a command this test cannot run: {command}"
    for text, module in EXTRAS.items():
        if text in command and importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    if args[1] == "enjoy.py" and not (train_dir / "cartpole").is_dir():  # run alone (-k): train its run first
        _run(["train.py"], train_dir)
    before = set(train_dir.glob("*/checkpoints/*.ckpt"))
    proc = _run(args[1:], train_dir)
    assert proc.returncode == 0, f"{command}\n{proc.stdout[-4000:]}"
    if args[1] == "train.py" and "--cfg" not in args and "--help" not in args:
        new = set(train_dir.glob("*/checkpoints/*.ckpt")) - before
        assert new, f"{command}: no new checkpoint\n{proc.stdout[-3000:]}"
    if "--help" in args:
        assert "Keys (" in proc.stdout, proc.stdout
    if args[1] == "enjoy.py":
        assert (train_dir / "cartpole" / "enjoy" / "eval.json").is_file(), proc.stdout[-3000:]


def _run(args, train_dir) -> subprocess.CompletedProcess:
    cut = () if "--cfg" in args or "--help" in args else CUT[args[0]]
    cmd = [sys.executable, str(REPO / args[0]), *args[1:], f"train_dir={train_dir}", *cut]
    return subprocess.run(cmd, cwd=REPO, env=env_with_repo(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300)
