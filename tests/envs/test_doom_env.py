"""The doom env family against the real ViZDoom engine (no mocks)."""

import math
import os

import numpy as np
import pytest

vzd = pytest.importorskip("vizdoom", reason="the doom env family needs the vizdoom package (pip install vizdoom)")

from omegaconf import OmegaConf  # noqa: E402

from sf_hydra.envs import make_env  # noqa: E402
from sf_hydra.envs.doom.family import known_scenarios, make_doom_env, resolve_scenario, single_player_scenarios  # noqa: E402
from sf_hydra.envs.doom.game import MULTIPLAYER_SCENARIOS  # noqa: E402
from sf_hydra.envs.doom.schema import DoomEnvConfig  # noqa: E402


@pytest.fixture(autouse=True)
def private_map_cache(tmp_path, monkeypatch):
    """Battle maps are built into the test's folder, not the user's cache."""
    from sf_hydra.envs.doom.maps.build import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "map_cache"))


def doom_cfg(scenario="basic", **overrides):
    cfg = OmegaConf.structured(DoomEnvConfig(name=f"doom_{scenario}", id=scenario))
    # What conf/env_family/doom.yaml sets.
    cfg.factory = {"_target_": "sf_hydra.envs.doom.family.DoomFamily"}
    cfg.frameskip = 4
    cfg.resolution = "256x144"
    cfg.downsample = 2
    cfg.obs_scale = 255.0
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


@pytest.fixture
def basic():
    env = make_doom_env(doom_cfg("basic"), seed=0)
    yield env
    env.close()


def action_named(env, name):
    return env.actions.names().index(name)


def run_episode(env, policy, seed=None, limit=10_000):
    """Play one episode; return (rewards, terminated, truncated, last obs)."""
    obs, _ = env.reset(seed=seed)
    rewards = []
    for _ in range(limit):
        obs, r, terminated, truncated, _ = env.step(policy())
        rewards.append(r)
        if terminated or truncated:
            return rewards, terminated, truncated, obs
    raise AssertionError(f"no episode end within {limit} steps")


def test_basic_builds_with_pixel_observations(basic):
    assert basic.observation_space.shape == (3, 72, 128)
    assert basic.observation_space.dtype == np.uint8
    assert basic.action_space.n == 4  # no-op + MOVE_LEFT, MOVE_RIGHT, ATTACK
    assert basic.actions.names() == ["NOOP", "MOVE_LEFT", "MOVE_RIGHT", "ATTACK"]
    obs, info = basic.reset(seed=1)
    assert obs.shape == (3, 72, 128) and obs.dtype == np.uint8
    assert basic.observation_space.contains(obs)
    assert obs.max() > 0  # a rendered frame, not a blank buffer


def test_random_steps_cross_episode_ends(basic):
    basic.reset(seed=0)
    basic.action_space.seed(0)
    ends, rewards = 0, []
    for _ in range(300):
        obs, r, terminated, truncated, info = basic.step(basic.action_space.sample())
        assert basic.observation_space.contains(obs)
        assert isinstance(r, float) and math.isfinite(r)
        rewards.append(r)
        if terminated or truncated:
            ends += 1
            basic.reset()
    assert ends >= 1
    assert len(set(rewards)) > 1


def test_timeout_truncates_and_last_obs_stays_valid(basic):
    # Doing nothing in basic never kills the monster: the scenario's 300-tic timeout ends it.
    rewards, terminated, truncated, obs = run_episode(basic, lambda: 0, seed=0)
    assert truncated and not terminated
    assert len(rewards) == 300 // 4
    assert all(r == -4.0 for r in rewards)  # living reward -1 per tic, 4 tics per step
    assert basic.observation_space.contains(obs)


def test_attack_kills_the_monster_in_some_episodes(basic):
    # The monster spawns at a random spot; straight ahead in a fraction of the seeds.
    # Seeded episodes are deterministic, so this is not flaky.
    attack = action_named(basic, "ATTACK")
    kills = 0
    for seed in range(30):
        rewards, terminated, truncated, _ = run_episode(basic, lambda: attack, seed=seed)
        if max(rewards) > 0:
            assert terminated and not truncated  # the kill ends the episode
            kills += 1
            break
    assert kills >= 1, "ATTACK never got a positive reward in 30 seeded basic episodes"


def test_same_seed_same_episode(basic):
    actions = np.random.default_rng(0).integers(0, basic.action_space.n, size=60)

    def play(seed):
        it = iter(actions)
        return run_episode(basic, lambda: next(it, 0), seed=seed)[0]

    assert play(5) == play(5)


def test_max_episode_steps_truncates():
    env = make_doom_env(doom_cfg("basic", max_episode_steps=7), seed=0)
    try:
        rewards, terminated, truncated, _ = run_episode(env, lambda: 0)
        assert truncated and not terminated and len(rewards) == 7
    finally:
        env.close()


def test_render_grayscale_and_known_scenarios():
    env = make_env(doom_cfg("basic", grayscale=True), seed=0, render_mode="rgb_array")
    try:
        obs, _ = env.reset()
        assert obs.shape == (1, 72, 128) and env.observation_space.shape == (1, 72, 128)
        frame = env.render()
        assert frame.shape == (144, 256, 3) and frame.dtype == np.uint8
    finally:
        env.close()
    assert "basic" in known_scenarios()


def test_resize_keeps_the_pixel_nearest_neighbour_picks_as_sample_factory_does():
    """Sample Factory's Doom observation: 160x120 rendered, resized to 128x72 by OpenCV's INTER_NEAREST,
    whose source pixel is floor(i * 120 / 72) down and floor(j * 160 / 128) across."""
    from sf_hydra.envs.doom.frames import nearest_indices

    assert nearest_indices(160, 128)[:6].tolist() == [0, 1, 2, 3, 5, 6]  # 0, 1.25, 2.5, 3.75, 5, 6.25
    assert nearest_indices(120, 72)[:4].tolist() == [0, 1, 3, 5]  # 0, 1.67, 3.33, 5
    cfg = doom_cfg("my_way_home", resolution="160x120", downsample=1, resize=[128, 72])
    env = make_env(cfg, seed=0, render_mode="rgb_array")
    try:
        obs, _ = env.reset(seed=0)
        assert obs.shape == env.observation_space.shape == (3, 72, 128) and obs.flags["C_CONTIGUOUS"]
        frame = env.render()  # the rendered frame, (120, 160, 3)
        assert frame.shape == (120, 160, 3)
        for i, j in [(0, 0), (1, 1), (2, 4), (71, 127), (40, 99)]:
            source = frame[math.floor(i * 120 / 72), math.floor(j * 160 / 128)]
            assert obs[:, i, j].tolist() == source.tolist(), (i, j)
        for _ in range(3):
            obs, *_ = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs)
    finally:
        env.close()


@pytest.mark.parametrize("bad", [[128], [0, 72], [128, 72, 3]])
def test_a_bad_resize_names_the_key_and_what_is_allowed(bad):
    from sf_hydra.core.errors import ConfigError
    from sf_hydra.envs.doom.frames import check_resize

    with pytest.raises(ConfigError, match=r"env\.resize.*\[width, height\], two integers >= 1"):
        make_env(doom_cfg("basic", resize=bad), seed=0)
    for other in ([128, 72.5], "128x72", [True, 72]):  # values the typed config refuses before: the check alone
        with pytest.raises(ConfigError, match=r"env\.resize"):
            check_resize(other)


def test_close_twice(basic):
    basic.reset()
    basic.close()
    basic.close()


def test_unknown_scenario_names_key_value_and_choices():
    with pytest.raises((KeyError, ValueError)) as err:
        make_doom_env(doom_cfg("no_such_scenario"))
    message = str(err.value)
    assert "env.id" in message and "no_such_scenario" in message and "defend_the_center" in message


def test_bad_resolution_and_kwargs_fail_clearly():
    with pytest.raises(ValueError, match="env.resolution"):
        make_doom_env(doom_cfg("basic", resolution="100x100"))
    with pytest.raises(ValueError, match="env.kwargs.no_such_setting"):
        make_doom_env(doom_cfg("basic", kwargs={"no_such_setting": 1}))


def test_kwargs_are_game_settings():
    env = make_doom_env(doom_cfg("basic", kwargs={"doom_skill": 1}, episode_timeout=100))
    try:
        assert env.game.get_doom_skill() == 1
        rewards, _, truncated, _ = run_episode(env, lambda: 0)
        assert truncated and len(rewards) == 100 // 4
    finally:
        env.close()


def test_multiplayer_scenarios_refused_without_host_args():
    assert MULTIPLAYER_SCENARIOS <= set(known_scenarios())
    for name in sorted(MULTIPLAYER_SCENARIOS):
        with pytest.raises(ValueError, match="game_args"):
            make_doom_env(doom_cfg(name))


def _missing_iwad(scenario):
    """doom.cfg / doom2.cfg need the commercial IWADs, which the wheel does not ship."""
    game = vzd.DoomGame()
    game.load_config(resolve_scenario(scenario))
    iwad = os.path.basename(game.get_doom_game_path())
    pkg = os.path.dirname(vzd.scenarios_path)
    return bool(iwad) and not any(os.path.exists(os.path.join(d, iwad)) for d in (vzd.scenarios_path, pkg))


@pytest.mark.parametrize("scenario", single_player_scenarios())
def test_every_single_player_scenario_steps(scenario):
    if _missing_iwad(scenario):
        with pytest.raises(RuntimeError, match=scenario):
            make_doom_env(doom_cfg(scenario))
        return
    env = make_doom_env(doom_cfg(scenario), seed=0)
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        env.action_space.seed(0)
        for _ in range(10):
            obs, r, terminated, truncated, _ = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs) and math.isfinite(r)
            if terminated or truncated:
                env.reset()
    finally:
        env.close()
