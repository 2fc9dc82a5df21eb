"""examples/custom_env: a user's own env family and encoder, named by dotted paths in the
user's own yaml and used from the command line, without package edits."""

import json
import subprocess
import sys

import pytest
import torch

from sf_hydra.app.train import check_config
from sf_hydra.config import ConfigError
from tests.conftest import REPO_ROOT, make_cfg

EXAMPLE_CONF = REPO_ROOT / "examples" / "custom_env" / "conf"


def run_train(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train.py", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_custom_family_and_encoder_train_from_the_command_line(tmp_path):
    result = run_train(
        "--config-dir", str(EXAMPLE_CONF), "env=custom/catch", f"train_dir={tmp_path}",
        "hardware.num_workers=1", "hardware.num_envs_per_worker=4", "train_for_env_steps=600",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = tmp_path / "catch"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] >= 600
    assert summary["episodes"] >= 50  # a catch episode is 7 steps on the 5x8 grid
    saved = (run_dir / "config.yaml").read_text()
    assert "_target_: examples.custom_env.catch_env.CatchFamily" in saved
    assert "_target_: examples.custom_env.grid_encoder.GridConv" in saved
    # The learner trained the example's encoder: its 3x3 conv is in the checkpoint.
    ckpt = torch.load(sorted((run_dir / "checkpoints").glob("*.ckpt"))[-1], map_location="cpu", weights_only=False)
    conv = [v for k, v in ckpt["state_dict"].items() if k.endswith("encoder.net.0.weight")]
    assert len(conv) == 1 and tuple(conv[0].shape) == (16, 1, 3, 3)
    # enjoy.py resolves the same dotted paths from the saved config and plays the policy.
    played = subprocess.run([sys.executable, "enjoy.py", f"run_dir={run_dir}", "episodes=3"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert played.returncode == 0, played.stderr[-3000:]
    result = json.loads((run_dir / "enjoy" / "eval.json").read_text())
    assert [e["length"] for e in result["episodes"]] == [7, 7, 7]


def test_custom_env_composes_without_the_slurm_extra():
    """The README's plain install has no submitit: the base env schema the example types its
    node with is there all the same."""
    code = (
        "import sys; sys.modules['submitit'] = None\n"
        "from hydra import compose, initialize_config_dir\n"
        "from sf_hydra.config import register_configs\n"
        "register_configs()\n"
        f"with initialize_config_dir(config_dir={str(REPO_ROOT / 'conf')!r}, version_base='1.3'):\n"
        f"    cfg = compose('train', overrides=['env=custom/catch', 'hydra.searchpath=[file://{EXAMPLE_CONF}]'])\n"
        "print(cfg.env.factory._target_)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "examples.custom_env.catch_env.CatchFamily"


def test_custom_env_config_is_unknown_without_its_config_dir(tmp_path):
    result = run_train("env=custom/catch", f"train_dir={tmp_path}", timeout=120)
    assert result.returncode == 2
    assert "env='custom/catch' is not allowed" in result.stderr


def test_bad_custom_setting_is_a_config_error_before_training(tmp_path):
    result = run_train("--config-dir", str(EXAMPLE_CONF), "env=custom/catch", f"train_dir={tmp_path}",
                       "env.kwargs.width=2", timeout=120)
    assert result.returncode == 2
    assert "env.kwargs.width=2 is not allowed: an integer >= 3" in result.stderr + result.stdout
    assert not (tmp_path / "catch" / "checkpoints").exists()


def test_bad_dotted_path_is_a_framed_config_error_before_training(tmp_path):
    result = run_train("--config-dir", str(EXAMPLE_CONF), "env=custom/catch", f"train_dir={tmp_path}",
                       "model.encoder._target_=examples.custom_env.grid_encoder.NoSuchEncoder", timeout=120)
    assert result.returncode == 2
    out = result.stderr + result.stdout
    assert "bad config: model.encoder._target_='examples.custom_env.grid_encoder.NoSuchEncoder' is not allowed: " \
           "an importable dotted path" in out
    assert "Traceback" not in out
    assert not (tmp_path / "catch" / "checkpoints").exists()


@pytest.mark.parametrize("key", ["env.factory._target_", "model.encoder._target_", "model.core._target_",
                                 "model.action_head._target_", "model._target_", "algo.optimizer._target_"])
def test_every_dotted_path_is_checked_and_named(tmp_path, key):
    with pytest.raises(ConfigError, match=rf"^{key}='no_such_pkg.Thing' is not allowed: an importable dotted path.*"
                                          r"No module named 'no_such_pkg'") as err:
        check_config(make_cfg(tmp_path, f"{key}=no_such_pkg.Thing"))
    assert err.value.key == key


def test_env_factory_must_be_an_env_family(tmp_path):
    with pytest.raises(ConfigError, match=r"env.factory._target_='collections.OrderedDict'.*subclass of sf_hydra.envs"):
        check_config(make_cfg(tmp_path, "env.factory._target_=collections.OrderedDict"))
