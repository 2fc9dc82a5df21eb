"""A config that breaks a rule of the config itself is refused before anything heavy is
imported (torch, lightning): refusing takes well under the 1.5 s budget here."""

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("override", ["algo.gamma=2", "selfplay.latest_prob=2", "model.rnn_type=gruu",
                                      "+algo.learnign_rate=1"])
def test_refused_without_importing_torch(tmp_path, override):
    result = subprocess.run([sys.executable, "-X", "importtime", str(REPO_ROOT / "train.py"), override],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "bad config:" in result.stderr
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "sf_hydra.app.cli" in imported
    assert not {"torch", "lightning"} & imported
    assert not any(tmp_path.iterdir()), "nothing is written for a refused run"
