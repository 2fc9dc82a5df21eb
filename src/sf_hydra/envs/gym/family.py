"""The `gym` family: any registered gymnasium id, built with `gymnasium.make`.

It offers two vector envs to batched sampling: the id's own vectorized version when gymnasium
registers one (`auto`, e.g. CartPole-v1's numpy `CartPoleVectorEnv`), and EnvPool's C++
thread pool (`envpool`, for the ids EnvPool knows).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from pathlib import Path
from typing import Optional

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from sf_hydra.core.errors import ConfigError
from sf_hydra.envs.family import EnvFamily, VectorEnv


def registered_ids() -> list:
    return sorted(gym.registry.keys())


def packaged_families() -> list:
    """The folders of sf_hydra/envs that hold a family (a `family.py`): for error hints."""
    here = str(Path(__file__).parents[1])  # sf_hydra/envs
    return sorted(m.name for m in pkgutil.iter_modules([here]) if m.ispkg and Path(here, m.name, "family.py").is_file())


def check_id(env_id: str) -> None:
    """Fail with the close matches when an id is not registered (before any process starts)."""
    if ":" in env_id:  # "my_module:MyEnv-v0": gymnasium imports the module, which registers it
        module, env_id = env_id.split(":", 1)
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError("env.id", f"{module}:{env_id}",
                              f"'<module>:<id>' whose module imports ({e}); the module registers the id") from None
    if env_id in gym.registry:
        _check_dependencies(env_id)
        return
    close = difflib.get_close_matches(env_id, registered_ids(), n=5, cutoff=0.5)
    hint = f"close matches: {close}" if close else f"{len(gym.registry)} ids are registered, e.g. CartPole-v1"
    raise ConfigError("env.id", env_id,
                      f"a registered gymnasium id ({hint}); other env families: {packaged_families()}")


def _check_dependencies(env_id: str) -> None:
    """A registered id whose package is missing (LunarLander without Box2D) fails here, not in
    gym.make after the run folder exists."""
    entry_point = gym.spec(env_id).entry_point
    if not isinstance(entry_point, str):
        return
    try:
        load_env_creator(entry_point)
    except gym.error.DependencyNotInstalled as e:
        raise ConfigError("env.id", env_id, f"an env whose dependencies are installed: {e}") from None


def make_gym_env(env_cfg, seed=None, render_mode=None) -> gym.Env:
    check_id(env_cfg.id)
    env = gym.make(env_cfg.id, render_mode=render_mode, **_env_kwargs(env_cfg))
    env.reset(seed=seed)
    return env


def _gym_id(env_id: str) -> str:
    """'module:Id' imports the module (which registers Id) and returns 'Id'."""
    if ":" in env_id:
        module, env_id = env_id.split(":", 1)
        importlib.import_module(module)
    return env_id


def _env_kwargs(env_cfg) -> dict:
    kwargs = dict(env_cfg.kwargs or {})
    if env_cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = env_cfg.max_episode_steps
    return kwargs


def _native(env_cfg, num_envs: int) -> Optional[VectorEnv]:
    """The id's own vectorized version, or None when gymnasium registers none."""
    env_id = _gym_id(env_cfg.id)
    if gym.spec(env_id).vector_entry_point is None:
        return None
    vec = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **_env_kwargs(env_cfg))
    mode = vec.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode not in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
        raise ValueError(f"{env_cfg.id}: its vector env resets with {mode}, which batched sampling does not handle")
    next_step = mode == gym.vector.AutoresetMode.NEXT_STEP
    return VectorEnv(vec, vec.single_observation_space, vec.single_action_space, next_step)


def _envpool(env_cfg, num_envs: int, seed) -> VectorEnv:
    import envpool  # the optional `envpool` extra, only for hardware.batched_sampling with its backend

    vec = envpool.make(str(env_cfg.id), env_type="gymnasium", num_envs=num_envs, seed=int(seed or 0),
                       **_env_kwargs(env_cfg))
    return VectorEnv(vec, vec.observation_space, vec.action_space, True)


class GymFamily(EnvFamily):
    """`env.id` is a registered gymnasium id (or `module:Id`, whose module registers it)."""

    vector_backends = ("envpool",)

    def make(self, env_cfg, seed=None, render_mode=None) -> gym.Env:
        return make_gym_env(env_cfg, seed=seed, render_mode=render_mode)

    def validate(self, env_cfg) -> None:
        check_id(env_cfg.id)

    def check_vector_backend(self, env_cfg, backend: str) -> None:
        try:
            envpool = importlib.import_module("envpool")
        except ImportError:
            raise ConfigError("hardware.vector_backend", backend,
                              "'auto' or 'sync': envpool is not installed (pip install envpool)") from None
        tasks = envpool.list_all_envs()
        if env_cfg.id not in tasks:
            close = difflib.get_close_matches(str(env_cfg.id), tasks, n=5, cutoff=0.5)
            hint = f"close matches: {close or tasks[:5]}"
            raise ConfigError("env.id", env_cfg.id, f"an EnvPool task with hardware.vector_backend=envpool ({hint})")

    def make_vector(self, env_cfg, num_envs: int, seed, backend: str) -> Optional[VectorEnv]:
        return _envpool(env_cfg, num_envs, seed) if backend == "envpool" else _native(env_cfg, num_envs)
