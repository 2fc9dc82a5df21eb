"""Doom games where players respawn (bots, several agents of ours) reward frags and deaths
through `env.delta_rewards`, never through ViZDoom's built-in per-state rewards: in vizdoom
1.3.2 the built-in death reward is paid at every step while the player is dead, and the
health reward pays for the health a respawn restores (see sf_hydra/envs/doom/shaping.py).
Checked on every doom config as composed, against the settings the engine would load, and
on `multi` in a real game (its map script's own reward is switched off there)."""

from pathlib import Path

import pytest

vzd = pytest.importorskip("vizdoom", reason="the doom env family needs the vizdoom package")

from sf_hydra.envs import make_env  # noqa: E402
from sf_hydra.envs.doom.game import apply_settings, resolve_scenario  # noqa: E402
from tests.conftest import CONF_DIR, compose_cfg  # noqa: E402

CONFIGS = sorted(p.stem for p in Path(CONF_DIR, "env", "doom").glob("*.yaml"))
# What a respawn resets or a dead player keeps being paid for: ViZDoom's rewards by state.
BUILT_IN = ("death_penalty", "death_reward", "frag_reward", "health_reward", "armor_reward", "damage_taken_penalty",
            "damage_taken_reward", "hit_taken_penalty", "hit_taken_reward", "damage_made_reward", "hit_reward")


def respawn_configs() -> dict:
    envs = {name: compose_cfg(f"env=doom/{name}").env for name in CONFIGS}
    return {name: env for name, env in envs.items() if env.num_agents > 1 or env.num_bots > 0}


@pytest.fixture(scope="module")
def respawning():
    return respawn_configs()


def test_every_multiplayer_config_is_checked(respawning):
    assert {"duel", "duel_bots", "deathmatch", "deathmatch_bots", "cig", "multi", "multi_duel"} <= set(respawning)


def test_frags_and_deaths_are_delta_rewards(respawning):
    for name, env in respawning.items():
        weights = env.delta_rewards
        assert weights.get("FRAGCOUNT", [0])[0] > 0, name
        assert weights.get("DEATHCOUNT", [0])[0] < 0, name
        assert set(env.episode_stats) >= {"FRAGCOUNT", "DEATHCOUNT"}, name


def test_no_built_in_reward_is_left_on(respawning):
    """The scenario's .cfg with the config's env.kwargs applied, as build_game loads them
    (unless the scenario's own reward is switched off as a whole)."""
    for name, env in respawning.items():
        if env.scenario_reward_scale == 0:
            continue
        game = vzd.DoomGame()
        game.load_config(resolve_scenario(env.id))
        apply_settings(game, {k: v for k, v in (env.kwargs or {}).items() if k != "game_args"})
        paid = {key: getattr(game, f"get_{key}")() for key in BUILT_IN}
        assert not any(paid.values()), (name, {k: v for k, v in paid.items() if v})


def test_multi_pays_frags_and_deaths_only():
    """`multi` against a built-in bot (the same rules and rewards as two agents of ours, in
    one process): every match's return is its frags minus its deaths, whoever ends it. Each
    step reports its shaped units (what PBT reweighs per policy): with the map's own reward
    off, the reward is exactly those units at the configured weights."""
    cfg = compose_cfg("env=doom/multi", "env.num_agents=1", "env.num_bots=1", "env.episode_timeout=1400").env
    assert cfg.scenario_reward_scale == 0
    weights = [w[0] for w in cfg.delta_rewards.values()] + [w[1] for w in cfg.delta_rewards.values()]
    paid_units = 0
    env = make_env(cfg, seed=0)
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        matches, ret = [], 0.0
        for _ in range(800):
            _, reward, terminated, truncated, info = env.step(env.action_space.sample())
            units = info["reward_shaping_units"]
            assert len(units) == len(weights) and reward == pytest.approx(float(units @ weights))
            paid_units += bool(units.any())
            ret += reward
            if terminated or truncated:
                stats = info["episode_extra_stats"]
                matches.append((ret, stats["FRAGCOUNT"] - stats["DEATHCOUNT"], stats["DEATHCOUNT"]))
                ret = 0.0
                env.reset()
    finally:
        env.close()
    assert len(matches) >= 2 and sum(deaths for *_, deaths in matches) >= 2, matches
    assert all(ret == expected for ret, expected, _ in matches), matches
    assert paid_units >= 2
