"""The `gym` family: any registered gymnasium id, built with `gymnasium.make`."""

from __future__ import annotations

import difflib
import importlib

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from sf_hydra.envs.registry import register_family


def registered_ids() -> list:
    return sorted(gym.registry.keys())


def check_id(env_id: str) -> None:
    """Fail with the close matches when an id is not registered (before any process starts)."""
    from sf_hydra.config.errors import ConfigError
    from sf_hydra.envs.registry import family_names

    if ":" in env_id:  # "my_module:MyEnv-v0": gymnasium imports the module, which registers it
        importlib.import_module(env_id.split(":", 1)[0])
        env_id = env_id.split(":", 1)[1]
    if env_id in gym.registry:
        _check_dependencies(env_id)
        return
    close = difflib.get_close_matches(env_id, registered_ids(), n=5, cutoff=0.5)
    hint = f"close matches: {close}" if close else f"{len(gym.registry)} ids are registered, e.g. CartPole-v1, Acrobot-v1"
    raise ConfigError("env.id", env_id, f"a registered gymnasium id ({hint}); other env families: {family_names()}")


def _check_dependencies(env_id: str) -> None:
    """A registered id whose package is missing (LunarLander without Box2D) fails here, not in
    gym.make after the run folder exists."""
    from sf_hydra.config.errors import ConfigError

    entry_point = gym.spec(env_id).entry_point
    if not isinstance(entry_point, str):
        return
    try:
        load_env_creator(entry_point)
    except gym.error.DependencyNotInstalled as e:
        raise ConfigError("env.id", env_id, f"an env whose dependencies are installed: {e}") from None


def make_gym_env(env_cfg, seed=None, render_mode=None) -> gym.Env:
    check_id(env_cfg.id)
    kwargs = dict(env_cfg.kwargs or {})
    if env_cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = env_cfg.max_episode_steps
    env = gym.make(env_cfg.id, render_mode=render_mode, **kwargs)
    env.reset(seed=seed)
    return env


register_family("gym", make_gym_env, registered_ids, validate=lambda env_cfg: check_id(env_cfg.id))
