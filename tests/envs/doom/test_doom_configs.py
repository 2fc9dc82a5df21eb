"""Every config under conf/env/doom: composes, validates as shipped, builds its real env
through make_env (the family that env.factory names) and steps it (random actions, across
episode ends). Together the configs cover every scenario that ships in the vizdoom wheel and
can run here."""

import math
from pathlib import Path

import pytest

vzd = pytest.importorskip("vizdoom", reason="the doom env family needs the vizdoom package")

import gymnasium as gym  # noqa: E402

from sf_hydra.app.train import check_config  # noqa: E402
from sf_hydra.envs import make_env  # noqa: E402
from sf_hydra.envs.doom.game import shipped_scenarios  # noqa: E402
from sf_hydra.envs.doom.maps.build import BATTLE_SPECS  # noqa: E402
from tests.conftest import CONF_DIR, compose_cfg  # noqa: E402

CONFIGS = sorted(p.stem for p in Path(CONF_DIR, "env", "doom").glob("*.yaml"))
# doom.cfg / doom2.cfg need the commercial IWADs, which the wheel does not ship.
NEEDS_COMMERCIAL_IWAD = {"doom", "doom2"}
MULTI_AGENT_STEPS, SINGLE_AGENT_STEPS = 40, 200
# Built in the quick tier (`-m "not slow"`): a shipped scenario, a generated battle map, two agents of ours in
# one game; the rest are `slow` (CI builds them all): each costs 1-3.5 s on a loaded 2-core box, ~30 s in all.
QUICK = {"basic", "battle", "duel"}


def test_every_shipped_and_generated_scenario_has_a_config():
    used = {compose_cfg(f"env=doom/{name}").env.id for name in CONFIGS}
    assert set(shipped_scenarios()) - NEEDS_COMMERCIAL_IWAD <= used
    assert set(BATTLE_SPECS) <= used
    assert {"battle", "battle2", "duel", "duel_bots", "deathmatch", "deathmatch_bots"} <= set(CONFIGS)


@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in CONFIGS])
def test_config_builds_its_env_and_steps(name):
    cfg = compose_cfg(f"env=doom/{name}")
    check_config(cfg)
    assert cfg.env.family == "doom" and cfg.env.name == f"doom_{name}"
    env = make_env(cfg.env, seed=0)
    try:
        multi = cfg.env.num_agents > 1
        assert getattr(env, "num_agents", 1) == cfg.env.num_agents
        expected = (gym.spaces.Tuple
                    if cfg.env.actions.groups and (len(cfg.env.actions.groups) > 1 or cfg.env.actions.turn_delta_bins)
                    else gym.spaces.Discrete)
        assert isinstance(env.action_space, expected)
        if cfg.env.measurements:
            assert env.observation_space["measurements"].shape == (len(cfg.env.measurements),)
            assert env.observation_space["obs"].shape == ((1 if cfg.env.grayscale else 3), 72, 128)
        else:
            assert env.observation_space.shape == ((1 if cfg.env.grayscale else 3), 72, 128)
        env.action_space.seed(0)
        obs, _ = env.reset(seed=0) if not multi else env.reset()
        for _ in range(MULTI_AGENT_STEPS if multi else SINGLE_AGENT_STEPS):
            if multi:
                obs, rewards, terminated, truncated, _ = env.step(
                    [env.action_space.sample() for _ in range(env.num_agents)])
                assert all(env.observation_space.contains(o) for o in obs) and all(math.isfinite(r) for r in rewards)
            else:
                obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                assert env.observation_space.contains(obs) and math.isfinite(reward)
                if terminated or truncated:
                    obs, _ = env.reset()
    finally:
        env.close()
