"""The `doom` family (`DoomFamily`): ViZDoom scenarios (`env=doom/basic`) built from a DoomEnvConfig.

One factory, three kinds of env, chosen by the config:
- num_agents == 1, num_bots == 0: DoomEnv, a single-player game;
- num_agents == 1, num_bots > 0: DoomEnv hosting a one-player deathmatch the bots join;
- num_agents > 1: DoomMultiAgentEnv, our players in one game (host + joins on loopback).

Importing this module needs the `vizdoom` package.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from sf_hydra.core.errors import ConfigError
from sf_hydra.envs.doom.actions import TURN_DELTA
from sf_hydra.envs.doom.env import DoomEnv
from sf_hydra.envs.doom.game import (
    known_scenarios,
    parse_buttons,
    parse_game_variables,
    resolve_scenario,
    single_player_scenarios,
)
from sf_hydra.envs.doom.multiagent import DoomMultiAgentEnv
from sf_hydra.envs.doom.network import free_udp_port, host_args
from sf_hydra.envs.doom.schema import DOOM_TICRATE
from sf_hydra.envs.family import EnvFamily

MAX_PLAYERS = 16  # ViZDoom's limit (PLAYER1..16 game variables)


def doom_env_kwargs(env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None) -> Dict[str, Any]:
    """DoomEnv's arguments from the config node (DictConfig or dataclass)."""
    actions = env_cfg.actions
    return dict(
        scenario=env_cfg.id,
        frameskip=env_cfg.frameskip,
        resolution=env_cfg.resolution,
        downsample=env_cfg.downsample,
        resize=None if getattr(env_cfg, "resize", None) is None else list(env_cfg.resize),
        grayscale=env_cfg.grayscale,
        episode_timeout=env_cfg.episode_timeout,
        max_episode_steps=env_cfg.max_episode_steps,
        seed=seed,
        render_mode=render_mode,
        game_settings=dict(env_cfg.kwargs or {}),
        actions={"groups": [list(g) for g in actions.groups], "turn_delta_bins": actions.turn_delta_bins,
                 "turn_delta_max": actions.turn_delta_max},
        measurements=list(env_cfg.measurements),
        episode_stats=list(env_cfg.episode_stats),
        delta_rewards={k: list(v) for k, v in (env_cfg.delta_rewards or {}).items()},
        scenario_reward_scale=env_cfg.scenario_reward_scale,
    )


def timelimit_arg(episode_timeout: int) -> str:
    """A match length in tics as the engine's +timelimit (minutes): it ends the match for
    every player at the same tic, where ViZDoom's own timeout counts per player."""
    return f"+timelimit {episode_timeout / (DOOM_TICRATE * 60.0):.6f}"


def make_doom_env(env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None):
    kwargs = doom_env_kwargs(env_cfg, seed, render_mode)
    if env_cfg.num_agents > 1:
        kwargs.update(episode_timeout=0, seed=None)
        rules = f"{timelimit_arg(env_cfg.episode_timeout)} {env_cfg.host_args}"
        return DoomMultiAgentEnv(
            env_cfg.num_agents, kwargs, host_rules=rules, bots=env_cfg.num_bots, seed=seed,
            connect_timeout_sec=env_cfg.connect_timeout_sec, connect_attempts=env_cfg.connect_attempts,
            step_timeout_sec=env_cfg.step_timeout_sec,
        )
    if env_cfg.num_bots > 0:
        kwargs["network_args"] = host_args(1, free_udp_port(), env_cfg.host_args, env_cfg.connect_timeout_sec)
        kwargs["bots"] = env_cfg.num_bots
    return DoomEnv(**kwargs)


def validate_doom_config(env_cfg) -> None:
    """Everything that can be checked without starting the engine (ConfigError otherwise)."""
    if env_cfg.id not in known_scenarios() and not os.path.isfile(str(env_cfg.id)):
        resolve_scenario(env_cfg.id)  # raises ConfigError naming the known scenarios
    groups = [list(g) for g in env_cfg.actions.groups]
    for g in groups:
        parse_buttons(g)
    names = [b for g in groups for b in g] + ([TURN_DELTA] if env_cfg.actions.turn_delta_bins else [])
    if len(set(names)) != len(names):
        raise ConfigError("env.actions.groups", groups,
                          f"each button in one group at most (and {TURN_DELTA} only via turn_delta_bins)")
    if env_cfg.actions.turn_delta_bins and (env_cfg.actions.turn_delta_bins < 2 or not groups):
        raise ConfigError("env.actions.turn_delta_bins", env_cfg.actions.turn_delta_bins,
                          "0, or >= 2 together with env.actions.groups")
    parse_game_variables(list(env_cfg.measurements))
    parse_game_variables(list(env_cfg.episode_stats), "env.episode_stats")
    parse_game_variables(list(env_cfg.delta_rewards), "env.delta_rewards")
    for name, weights in env_cfg.delta_rewards.items():
        if len(weights) != 2:
            raise ConfigError(f"env.delta_rewards.{name}", list(weights),
                              "[reward per unit increase, reward per unit decrease]")
    if not 1 <= env_cfg.num_agents <= MAX_PLAYERS:
        raise ConfigError("env.num_agents", env_cfg.num_agents, f"1..{MAX_PLAYERS}")
    if not 0 <= env_cfg.num_bots <= MAX_PLAYERS - env_cfg.num_agents:
        raise ConfigError("env.num_bots", env_cfg.num_bots, f"0..{MAX_PLAYERS} - env.num_agents")
    if env_cfg.num_agents > 1 and not env_cfg.episode_timeout:
        raise ConfigError("env.episode_timeout", env_cfg.episode_timeout,
                          "the match length in tics (> 0) when env.num_agents > 1")
    for key in ("connect_timeout_sec", "step_timeout_sec"):
        if not getattr(env_cfg, key) > 0:
            raise ConfigError(f"env.{key}", getattr(env_cfg, key), "a number of seconds > 0")
    if env_cfg.connect_attempts < 1:
        raise ConfigError("env.connect_attempts", env_cfg.connect_attempts, "an integer >= 1")


class DoomFamily(EnvFamily):
    """`env.id`: a scenario shipped with ViZDoom, one of our generated maps, or a .cfg path."""

    pixel_formats = ("CHW",)  # its frames are channels first already

    def make(self, env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None):
        return make_doom_env(env_cfg, seed=seed, render_mode=render_mode)

    def validate(self, env_cfg) -> None:
        validate_doom_config(env_cfg)

    def concurrent_make(self, env_cfg) -> bool:
        """A single-player game's engine starts in a process of its own, which the creating thread only
        waits for. Games with bots or other players each probe for a free UDP port (envs/doom/network.py),
        which envs started together could race for: those start one by one."""
        return env_cfg.num_agents == 1 and env_cfg.num_bots == 0

    def episode_stats(self, env_cfg):
        return tuple(env_cfg.episode_stats)

    def reward_shaping(self, env_cfg):
        return {name: tuple(weights) for name, weights in env_cfg.delta_rewards.items()}


__all__ = ["DoomEnv", "DoomFamily", "DoomMultiAgentEnv", "make_doom_env", "known_scenarios", "single_player_scenarios",
           "resolve_scenario"]
