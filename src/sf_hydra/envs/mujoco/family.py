"""The `mujoco` family (`MujocoFamily`): gymnasium's MuJoCo tasks (`env=mujoco/halfcheetah`).

Importing this module needs the `mujoco` package (pip install 'sf_hydra[mujoco]'), so that a
missing install is reported as a config error before any process starts.
"""

from __future__ import annotations

import difflib
import inspect
import logging
from typing import Optional

import gymnasium as gym
import mujoco  # at import: a missing package becomes a clear config error (env.factory._target_)
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
from gymnasium.envs.registration import load_env_creator

from sf_hydra.core.errors import ConfigError
from sf_hydra.envs.family import EnvFamily
from sf_hydra.envs.wrappers import ActionRepeat, float32_observations

log = logging.getLogger(__name__)

# The tasks that run on the `mujoco` bindings; -v2/-v3 need the retired mujoco-py.
SUPPORTED_VERSIONS = ("-v4", "-v5")
# Arguments our own keys set (or the caller, for render_mode): not accepted in env.kwargs.
RESERVED_KWARGS = {
    "max_episode_steps": "env.max_episode_steps", "reset_noise_scale": "env.reset_noise_scale",
    "width": "env.render_width", "height": "env.render_height", "render_mode": "enjoy's render options",
}


def known_ids() -> list:
    return sorted(
        env_id for env_id, spec in gym.registry.items()
        if isinstance(spec.entry_point, str) and spec.entry_point.startswith("gymnasium.envs.mujoco.")
        and env_id.endswith(SUPPORTED_VERSIONS)
    )


def task_arguments(env_id: str) -> list:
    """What the task's constructor (and MuJoCo's base env) accept as keyword arguments."""
    names = set()
    for fn in (load_env_creator(gym.spec(env_id).entry_point).__init__, MujocoEnv.__init__):
        names |= {p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind == p.KEYWORD_ONLY or p.kind == p.POSITIONAL_OR_KEYWORD}
    return sorted(names - {"self", "model_path", "observation_space"})


def validate_env(env_cfg) -> None:
    """Before any process starts: a known task id, and kwargs the task accepts."""
    ids = known_ids()
    if env_cfg.id not in ids:
        close = difflib.get_close_matches(str(env_cfg.id), ids, n=3, cutoff=0.5)
        hint = f"close matches: {close}; " if close else ""
        raise ConfigError("env.id", env_cfg.id, f"a gymnasium MuJoCo task ({hint}all: {ids})")
    allowed = task_arguments(env_cfg.id)
    for key in env_cfg.kwargs or {}:
        if key in RESERVED_KWARGS:
            raise ConfigError(f"env.kwargs.{key}", env_cfg.kwargs[key],
                              f"not in env.kwargs: it is set by {RESERVED_KWARGS[key]}")
        if key not in allowed:
            raise ConfigError(f"env.kwargs.{key}", env_cfg.kwargs[key], f"an argument of {env_cfg.id}: {allowed}")


def _log_mujoco_warning(message: str) -> None:
    """MuJoCo >= 4 warns, on every model load, that gymnasium's task files use deprecated XML
    attributes: not the user's to fix, so logged at debug level (the rest as warnings)."""
    log.log(logging.DEBUG if "deprecated" in message else logging.WARNING, "mujoco: %s", message)


# Process-wide; also keeps MuJoCo from writing MUJOCO_LOG.TXT into the working directory.
mujoco.set_mju_user_warning(_log_mujoco_warning)


def make_mujoco_env(env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None) -> gym.Env:
    """MujocoEnvConfig -> env. `max_episode_steps` counts agent steps (x frameskip physics steps)."""
    kwargs = dict(env_cfg.kwargs or {})
    if env_cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = env_cfg.max_episode_steps * env_cfg.frameskip
    if env_cfg.reset_noise_scale is not None:
        kwargs["reset_noise_scale"] = env_cfg.reset_noise_scale
    env = gym.make(env_cfg.id, render_mode=render_mode, width=env_cfg.render_width, height=env_cfg.render_height,
                   **kwargs)
    if env_cfg.frameskip > 1:
        env = ActionRepeat(env, env_cfg.frameskip)
    if env_cfg.float32_observations:
        env = float32_observations(env)
    env.reset(seed=seed)
    return env


class MujocoFamily(EnvFamily):
    """`env.id`: a gymnasium MuJoCo task (-v4/-v5)."""

    def make(self, env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None) -> gym.Env:
        return make_mujoco_env(env_cfg, seed=seed, render_mode=render_mode)

    def validate(self, env_cfg) -> None:
        validate_env(env_cfg)
