"""`python enjoy.py --help`: enjoy's own keys with their meanings (not Hydra's generic help, which listed
train's internal groups under the title "cli is powered by Hydra")."""

from __future__ import annotations

import subprocess
import sys

from tests.faults.runs import REPO, env_with_repo


def _enjoy_help(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "enjoy.py"), "--help", *args], cwd=REPO, env=env_with_repo(),
                          capture_output=True, text=True, timeout=120)


def test_enjoy_help_lists_its_keys_with_their_meanings():
    proc = _enjoy_help()
    assert proc.returncode == 0, proc.stderr
    assert "powered by Hydra" not in proc.stdout
    assert "python enjoy.py experiment=<name>" in proc.stdout
    assert any(line.startswith("  episodes=5 ") and "episodes to play" in line for line in proc.stdout.splitlines())
    for internal in ("env_family", "schema/env", "experiments:"):
        assert internal not in proc.stdout


def test_enjoy_help_prefix_narrows_it():
    proc = _enjoy_help("vid")
    assert proc.returncode == 0 and "video=false" in proc.stdout and "episodes=" not in proc.stdout, proc.stdout
    assert _enjoy_help("nope").returncode == 2
