"""Every experiment config composes, and either validates or says what is not available yet."""


import pytest
from omegaconf import OmegaConf

from sf_hydra.config import ConfigError
from sf_hydra.train import check_config
from tests.conftest import REPO_ROOT, compose_cfg

EXPERIMENTS = sorted(p.stem for p in (REPO_ROOT / "experiments").glob("*.yaml"))
NOT_AVAILABLE = ("not available", "not installed")


def sweep_envs(name: str) -> list:
    """The env choices an experiment's own sweep goes over (none: the experiment's env)."""
    params = (OmegaConf.load(REPO_ROOT / "experiments" / f"{name}.yaml")
              .get("hydra", {}).get("sweeper", {}).get("params", {}))
    return [f"env={e}" for e in str(params["env"]).split(",")] if "env" in params else [None]


CASES = [(name, env) for name in EXPERIMENTS for env in sweep_envs(name)]


def test_experiments_are_found_as_a_config_group():
    assert (REPO_ROOT / "conf" / "experiments").resolve() == (REPO_ROOT / "experiments").resolve()
    assert len(EXPERIMENTS) >= 12


def test_experiment_is_both_a_run_name_and_a_preset():
    cfg = compose_cfg("+experiment=mujoco_halfcheetah", "experiment=my_run")
    assert cfg.experiment == "my_run" and cfg.env.family == "mujoco"


def test_each_file_says_what_it_reproduces():
    for name in EXPERIMENTS:
        lines = (REPO_ROOT / "experiments" / f"{name}.yaml").read_text().splitlines()
        assert lines[0] == "# @package _global_", name
        assert lines[1].startswith("# ") and len(lines[1]) > 30, (
            f"{name}: second line must say what it reproduces, on what hardware")


@pytest.mark.parametrize("name, env", CASES, ids=[f"{n}-{e}" if e else n for n, e in CASES])
def test_experiment_composes(name, env):
    overrides = [f"+experiment={name}"] + ([env] if env else [])
    cfg = compose_cfg(*overrides)
    try:
        check_config(cfg)
    except ConfigError as e:
        assert any(text in str(e) for text in NOT_AVAILABLE), f"{name}: {e}"
