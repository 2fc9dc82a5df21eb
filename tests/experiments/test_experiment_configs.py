"""Every experiment config composes, and either validates or says what is not available yet."""

import re

import pytest
from omegaconf import OmegaConf

from sf_hydra.app.train import check_config
from sf_hydra.config import ConfigError
from tests.conftest import REPO_ROOT, compose_cfg

EXPERIMENTS = sorted(p.stem for p in (REPO_ROOT / "experiments").glob("*.yaml"))
NOT_AVAILABLE = ("not available", "not installed")


def sweep_envs(name: str) -> list:
    """The env choices an experiment's own sweep goes over (none: the experiment's env)."""
    params = (OmegaConf.load(REPO_ROOT / "experiments" / f"{name}.yaml")
              .get("hydra", {}).get("sweeper", {}).get("params", {}))
    return [f"env={e}" for e in str(params["env"]).split(",")] if "env" in params else [None]


CASES = [(name, env) for name in EXPERIMENTS for env in sweep_envs(name)]
FAMILY_EXTRAS = {"doom": "vizdoom", "atari": "ale_py", "mujoco": "mujoco"}  # the module each family's extra installs


def skip_without_extra(name: str, env=None) -> None:
    """Skips (not fails) a preset whose env family's extra is not installed."""
    if env is None:
        text = (REPO_ROOT / "experiments" / f"{name}.yaml").read_text()
        found = re.search(r"override /env: *(\S+)", text)
        env = found.group(1) if found else ""
    family = env.removeprefix("env=").split("/")[0]
    if family in FAMILY_EXTRAS:
        pytest.importorskip(FAMILY_EXTRAS[family], reason=f"{name} needs the {family} extra")


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
        assert lines[1].startswith("# Needs: ") and len(lines[1]) > 30, (
            f"{name}: second line must say what it needs (extras, workers x envs, hardware)")
        assert lines[2].startswith("# ") and len(lines[2]) > 30, f"{name}: third line: what it reproduces"


@pytest.mark.parametrize("name, env", CASES, ids=[f"{n}-{e}" if e else n for n, e in CASES])
def test_experiment_composes(name, env):
    skip_without_extra(name, env)
    overrides = [f"+experiment={name}"] + ([env] if env else [])
    cfg = compose_cfg(*overrides)
    try:
        check_config(cfg)
    except ConfigError as e:
        assert any(text in str(e) for text in NOT_AVAILABLE), f"{name}: {e}"


# Each of the paper's four multi-policy Doom presets runs once in CI (~10-20 s each here: the
# Doom games' start-up), scaled down; the duel runs in the quick set, the other three are slow.
SELF_PLAY_PRESETS = ["doom_duel_selfplay"] + [pytest.param(name, marks=pytest.mark.slow) for name in (
    "doom_deathmatch_selfplay", "doom_duel_bots", "doom_deathmatch_bots")]


@pytest.mark.slow
@pytest.mark.parametrize("name", SELF_PLAY_PRESETS)
def test_self_play_presets_run_scaled_down(tmp_path, name):
    """The paper's multi-policy Doom presets train as shipped (8 policies with PBT ranked by
    frags), scaled to this machine: 1 worker x 1 env, a small batch, short matches, a few
    seconds. In the self-play presets (several agents of ours per game) the seats of that one
    game go to several of the 8 policies (pbt.mix_policies_in_one_env), each given its seat's steps."""
    import json

    from sf_hydra.app.train import train

    skip_without_extra(name)
    cfg = compose_cfg(f"+experiment={name}", f"train_dir={tmp_path}", "hardware.num_workers=1",
                      "hardware.num_envs_per_worker=1", "algo.batch_size=64", "env.episode_timeout=420",
                      "train_for_seconds=5")
    assert cfg.algo.num_policies == 8 and cfg.pbt.with_pbt and cfg.pbt.target_objective == "FRAGCOUNT"
    summary = train(cfg)
    assert summary["policy_version"] >= 1 and len(summary["policies"]) == 8
    for k in range(8):  # every member of the population has its hyperparameter history
        start = json.loads((tmp_path / cfg.experiment / "pbt" / f"hyperparams_{k}.jsonl").read_text().splitlines()[0])
        assert start["why"] == "start" and start["gamma"] == 0.995
    seated = [p["policy"] for p in summary["policies"] if p["env_steps"] > 0]
    if cfg.env.num_agents > 1:  # one env, its agents seated by several policies (seed 0's draw)
        assert len(seated) >= 2, summary["policies"]
    else:  # one agent of ours against the built-in bots
        assert cfg.env.num_bots >= 1 and seated, summary["policies"]
