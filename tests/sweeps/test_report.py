"""`python -m sf_hydra.report`: a real sweep's event files -> a PNG with one curve per config
(seeds averaged) and a table of final scores."""

import subprocess
import sys

import numpy as np
import pytest

from sf_hydra.report.plot import COLORS
from tests.conftest import FAST_OVERRIDES, REPO_ROOT


def color_pixels(image: np.ndarray, hex_color: str) -> int:
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]) / 255.0
    return int((np.abs(image[..., :3] - rgb).max(axis=-1) < 0.02).sum())


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """2 learning rates x 2 seeds of short CartPole runs, through the real CLI."""
    train_dir = tmp_path_factory.mktemp("report")
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), "--multirun", f"train_dir={train_dir}", "sweep_name=lr",
           *FAST_OVERRIDES, "algo.learning_rate=0.001,0.0003", "seed=1,2", "train_for_env_steps=8000",
           "logger.experiment_summaries_interval=0.1"]  # points on each curve however fast the 8000 steps go
    result = subprocess.run(cmd, cwd=train_dir, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return train_dir / "multirun" / "lr"


@pytest.mark.slow
def test_report_plots_one_curve_per_config(sweep_dir, tmp_path):
    import matplotlib.image

    out = tmp_path / "curves.png"
    result = subprocess.run([sys.executable, "-m", "sf_hydra.report", str(sweep_dir), "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    image = matplotlib.image.imread(out)
    assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 500
    drawn = [color_pixels(image, c) for c in COLORS[:3]]
    # Two configs: two long lines in the first two colours (a legend swatch alone is ~80 pixels).
    assert drawn[0] > 300 and drawn[1] > 300, drawn
    assert drawn[2] < 50, drawn

    table = [line for line in result.stdout.splitlines() if line.startswith("algo.learning_rate=")]
    assert len(table) == 2, result.stdout
    assert all(line.split()[1] == "2" for line in table), table  # 2 seeds each


def test_report_names_what_is_missing(tmp_path):
    result = subprocess.run([sys.executable, "-m", "sf_hydra.report", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "no runs" in result.stderr and str(tmp_path) in result.stderr
