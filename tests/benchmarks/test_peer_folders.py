"""The comparisons' peers (Sample Factory's venv, LeanRL's venv and checkout) live by default in a folder of the
user's cache, `$XDG_CACHE_HOME/sf_hydra/peers/<name>` (`~/.cache/...` without XDG_CACHE_HOME), which each script's
`--help` names; nothing the repository holds (a script, a test, a README) defaults to, or tells a user to use, an
absolute folder of one machine (/work/..., /tmp/base)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.runs import env_with_repo

REPO = Path(__file__).resolve().parents[2]
# script -> {its flag: the peer folder it names by default}
PEERS = {
    "vs_sample_factory.py": {"--venv": "sf_venv"},
    "learning_vs_sample_factory.py": {"--venv": "sf_venv"},
    "vs_leanrl.py": {"--venv": "leanrl_venv", "--leanrl": "leanrl"},
    "doom_random_policy.py": {"--sf-python": "sf_venv/bin/python"},
}
# A folder of one machine: where these scripts' peers and base checkouts used to default to
MACHINE_FOLDER = re.compile(r"(?<![\w.~-])/(?:work|tmp/base)\b")


def _help(script: str, cache: Path) -> str:
    env = {**env_with_repo(), "XDG_CACHE_HOME": str(cache), "COLUMNS": "1000"}  # one line a flag: argparse wraps
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--help"], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return " ".join(proc.stdout.split())


@pytest.mark.parametrize("script", sorted(PEERS))
def test_help_names_the_peer_folder_under_the_users_cache(script, tmp_path):
    said = _help(script, tmp_path / "cache")
    for flag, name in PEERS[script].items():
        folder = f"{tmp_path / 'cache'}/sf_hydra/peers/{name}"
        assert re.search(rf"{re.escape(flag)} \S+ .*default: {re.escape(folder)}\b", said), \
            f"{script} --help does not name {flag}'s default {folder}:\n{said}"


def test_without_xdg_cache_home_the_cache_is_in_home(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from _common import peer_dir
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("HOME", str(tmp_path))
        for unset in (None, "", "relative/cache"):  # the XDG spec: unset, empty or relative means ~/.cache
            mp.delenv("XDG_CACHE_HOME", raising=False) if unset is None else mp.setenv("XDG_CACHE_HOME", unset)
            assert peer_dir("sf_venv") == tmp_path / ".cache" / "sf_hydra" / "peers" / "sf_venv"
    finally:
        mp.undo()


def _repository_texts():
    """The scripts, tests and docs a user reads or runs (the data files left out: Sample Factory's own help text)."""
    for path in sorted(REPO.rglob("*")):
        parts = path.relative_to(REPO).parts
        if path.suffix in (".py", ".md", ".sh") and parts[0] in ("benchmarks", "tests", "docs", "cluster", "examples",
                                                                  "src", "README.md"):
            yield path


def test_nothing_defaults_to_a_folder_of_one_machine():
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}" for path in _repository_texts()
             for n, line in enumerate(path.read_text().splitlines(), 1) if MACHINE_FOLDER.search(line)
             and path != Path(__file__)]
    assert not found, "absolute folders of one machine (use the peer folder or a folder of the checkout):\n" + \
        "\n".join(found)
