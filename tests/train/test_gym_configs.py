"""The named gym configs (acrobot, pendulum, lunar_lander): each composes with the
defaults its file sets, passes validation as shipped, and trains a short real run; a
missing Box2D is a config error before anything starts."""

import importlib.util
import subprocess
import sys

import pytest

from sf_hydra.app.train import check_config, train
from tests.conftest import REPO_ROOT, compose_cfg, make_cfg

HAS_BOX2D = importlib.util.find_spec("Box2D") is not None
NEEDS_BOX2D = pytest.mark.skipif(not HAS_BOX2D, reason="the box2d extra (Box2D) is not installed")

# name -> (gymnasium id, action kind)
CONFIGS = {
    "acrobot": ("Acrobot-v1", "discrete"),
    "pendulum": ("Pendulum-v1", "box"),
    "lunar_lander": ("LunarLander-v3", "discrete"),
}
PARAMS = [pytest.param(name, marks=NEEDS_BOX2D) if name == "lunar_lander" else name for name in CONFIGS]


@pytest.mark.parametrize("name", PARAMS)
def test_config_composes_and_validates_as_shipped(name):
    cfg = compose_cfg(f"env=gym/{name}")
    assert cfg.env.family == "gym" and cfg.env.id == CONFIGS[name][0] and cfg.env.name == name
    assert cfg.train_for_env_steps <= 1_000_000  # a budget that learns, not the global default
    check_config(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("name", PARAMS)
def test_config_trains_a_short_run(tmp_path, name):
    # The fast settings (2 workers x 4 envs x 16 steps = 128 = one batch) keep sync PPO valid.
    # In serial mode: the same sampler code without the worker processes' start-up.
    cfg = make_cfg(tmp_path, f"env=gym/{name}", "algo.batch_size=64", "algo.num_batches_per_epoch=2",
                   "hardware.serial_mode=true", "train_for_env_steps=1500")
    summary = train(cfg)
    assert summary["env_steps"] >= 1500 and summary["policy_version"] >= 3


def test_missing_box2d_is_a_config_error():
    """In a fresh interpreter where importing Box2D fails, as on a machine without it."""
    code = (
        "import sys; sys.modules['Box2D'] = None\n"
        "from sf_hydra.app.train import check_config\n"
        "from sf_hydra.core.errors import ConfigError\n"
        "from tests.conftest import compose_cfg\n"
        "try:\n"
        "    check_config(compose_cfg('env=gym/lunar_lander'))\n"
        "except ConfigError as e:\n"
        "    print('CONFIG_ERROR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert "CONFIG_ERROR env.id='LunarLander-v3'" in out.stdout, out.stdout + out.stderr
    assert "gymnasium[box2d]" in out.stdout


@pytest.mark.long
@pytest.mark.parametrize("name, bar", [("acrobot", -100.0), ("pendulum", -300.0),
                                       pytest.param("lunar_lander", 100.0, marks=NEEDS_BOX2D)])
def test_default_config_learns_within_its_budget(tmp_path, name, bar):
    """Each named config reaches its bar (average over the last 100 episodes) within the
    budget its file sets; the run stops as soon as it does."""
    cfg = compose_cfg(f"train_dir={tmp_path}", f"env=gym/{name}", f"train_until_avg_return={bar}")
    summary = train(cfg)
    assert summary["env_steps"] <= cfg.train_for_env_steps + 10_000
    assert summary["avg_return"] >= bar, summary
