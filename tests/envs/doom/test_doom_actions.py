"""Doom action spaces (one button, button groups, discretized turning) and measurements,
mapped onto the real engine's buttons and game variables; config errors name the key."""

import numpy as np
import pytest

vzd = pytest.importorskip("vizdoom", reason="the doom env family needs the vizdoom package")

import gymnasium as gym  # noqa: E402

from sf_hydra.core.errors import ConfigError  # noqa: E402
from sf_hydra.core.spaces import action_spec, discrete_sizes, to_env_action  # noqa: E402
from sf_hydra.envs.doom.actions import ButtonGroupActions, OneButtonActions, make_action_mapping  # noqa: E402
from sf_hydra.envs.doom.env import DoomEnv  # noqa: E402
from sf_hydra.envs.doom.family import validate_doom_config  # noqa: E402
from tests.conftest import compose_cfg  # noqa: E402

B = vzd.Button
GROUPS = [[B.MOVE_FORWARD, B.MOVE_BACKWARD], [B.MOVE_RIGHT, B.MOVE_LEFT], [B.ATTACK], [B.SPEED]]


def test_groups_make_a_tuple_with_turn_bins():
    m = ButtonGroupActions(GROUPS, B.TURN_LEFT_RIGHT_DELTA, turn_bins=11, turn_max=10.0)
    assert m.space == gym.spaces.Tuple([gym.spaces.Discrete(n) for n in (3, 3, 2, 2, 11)])
    assert m.buttons == [B.MOVE_FORWARD, B.MOVE_BACKWARD, B.MOVE_RIGHT, B.MOVE_LEFT, B.ATTACK, B.SPEED,
                         B.TURN_LEFT_RIGHT_DELTA]
    assert m.to_buttons((0, 0, 0, 0, 5)) == [0, 0, 0, 0, 0, 0, 0.0]  # the middle bin does not turn
    assert m.to_buttons((2, 1, 1, 1, 0)) == [0, 1, 1, 0, 1, 1, -10.0]
    assert m.to_buttons((1, 2, 0, 0, 10)) == [1, 0, 0, 1, 0, 0, 10.0]
    assert m.names()[-1][0] == "TURN -10.0" and m.names()[0] == ["NOOP", "MOVE_FORWARD", "MOVE_BACKWARD"]


def test_no_groups_or_one_group_is_one_button_at_a_time():
    assert isinstance(make_action_mapping([B.ATTACK, B.USE]), OneButtonActions)
    m = make_action_mapping([B.ATTACK], groups=[[B.MOVE_LEFT, B.MOVE_RIGHT]])
    assert isinstance(m, OneButtonActions) and m.space.n == 3 and m.to_buttons(2) == [0.0, 1.0]


def test_the_sampler_and_the_heads_take_the_tuple():
    """What the rollout worker allocates and the model's categorical heads build for it."""
    space = ButtonGroupActions(GROUPS, B.TURN_LEFT_RIGHT_DELTA, 11).space
    assert discrete_sizes(space) == [3, 3, 2, 2, 11]
    shape, dtype = action_spec(space)
    assert shape == (5,)
    assert to_env_action(space, np.array([1, 2, 0, 1, 7])) == (1, 2, 0, 1, 7)


def turning_env(**kwargs):
    return DoomEnv("battle", actions={"groups": [["MOVE_FORWARD", "MOVE_BACKWARD"], ["MOVE_RIGHT", "MOVE_LEFT"],
                                                 ["ATTACK"], ["SPEED"]],
                                      "turn_delta_bins": 11, "turn_delta_max": 10.0},
                   measurements=["ANGLE", "SELECTED_WEAPON_AMMO", "HEALTH"], seed=0, **kwargs)


def test_turn_bins_turn_by_their_speed_for_every_tic():
    env = turning_env()
    try:
        env.reset(seed=0)
        env.step((0, 0, 0, 0, 5))  # ViZDoom applies a delta from the second tic of an episode on
        turned = []
        for turn_bin, speed in ((10, 10.0), (0, -10.0), (7, 4.0)):
            before = env.step((0, 0, 0, 0, turn_bin))[0]["measurements"][0]
            after = env.step((0, 0, 0, 0, turn_bin))[0]["measurements"][0]
            turned.append(((before - after + 180) % 360 - 180, speed))  # positive speed turns right (angle falls)
        for delta, speed in turned:
            assert delta == pytest.approx(4 * speed, abs=0.5)  # 4 tics per step
    finally:
        env.close()


def test_attack_group_fires_and_measurements_follow_the_game():
    env = turning_env()
    try:
        obs, _ = env.reset(seed=0)
        assert obs["measurements"].dtype == np.float32 and obs["measurements"][2] == 100.0
        ammo = obs["measurements"][1]
        for _ in range(10):
            obs = env.step((0, 0, 1, 0, 5))[0]
        assert obs["measurements"][1] < ammo  # the pistol used bullets
    finally:
        env.close()


def doom_env_node(**overrides):
    cfg = compose_cfg("env=doom/battle").env
    for key, value in overrides.items():
        node = cfg
        *path, last = key.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    return cfg


@pytest.mark.parametrize("overrides, key", [
    ({"actions.groups": [["MOVE_FORWARD", "FLY_UP"]]}, "env.actions.groups"),
    ({"actions.groups": [["ATTACK"], ["ATTACK"]]}, "env.actions.groups"),
    ({"actions.groups": [], "actions.turn_delta_bins": 11}, "env.actions.turn_delta_bins"),
    ({"actions.turn_delta_bins": 1}, "env.actions.turn_delta_bins"),
    ({"measurements": ["HEALTH", "MANA"]}, "env.measurements"),
    ({"episode_stats": ["KILLS"]}, "env.episode_stats"),
    ({"delta_rewards": {"FRAGS": [1.0, -1.0]}}, "env.delta_rewards"),
    ({"delta_rewards": {"FRAGCOUNT": [1.0]}}, "env.delta_rewards.FRAGCOUNT"),
    ({"num_agents": 0}, "env.num_agents"),
    ({"num_agents": 2, "episode_timeout": None}, "env.episode_timeout"),
    ({"num_bots": 16}, "env.num_bots"),
    ({"connect_attempts": 0}, "env.connect_attempts"),
    ({"id": "no_such_map"}, "env.id"),
])
def test_bad_doom_settings_are_config_errors(overrides, key):
    with pytest.raises(ConfigError) as err:
        validate_doom_config(doom_env_node(**overrides))
    assert err.value.key == key, str(err.value)
