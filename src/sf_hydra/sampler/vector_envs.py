"""Vectorized envs for `hardware.batched_sampling=true`: one object steps a whole split of
envs per call, so the worker's per-env Python loop disappears.

Backends (`hardware.vector_backend`):
- `auto`: the env's own vectorized implementation when gymnasium registers one (e.g.
  CartPole-v1's numpy `CartPoleVectorEnv`), else `sync`.
- `sync`: gymnasium's `SyncVectorEnv` over envs from the env family's factory (any family).
- `envpool`: EnvPool's C++ thread pool (gym-family ids that EnvPool knows).

Each is returned with its per-env spaces and whether it resets envs "next step" (the step
after a done ignores the action and returns the first observation of the new episode:
the agent-rows worker then treats that step as an inactive transition).
"""

from __future__ import annotations

import difflib
import importlib
from functools import partial
from typing import NamedTuple

import gymnasium as gym

from sf_hydra.config.errors import ConfigError

BACKENDS = ("auto", "sync", "envpool")


class VectorEnv(NamedTuple):
    env: object  # gymnasium.vector.VectorEnv or an EnvPool env
    observation_space: gym.Space  # of one env
    action_space: gym.Space
    resets_next_step: bool


def check_batched_sampling(cfg) -> None:
    """Raises ConfigError for an unusable backend choice, before any process starts."""
    backend = cfg.hardware.vector_backend
    if backend not in BACKENDS:
        raise ConfigError("hardware.vector_backend", backend, f"one of {list(BACKENDS)}")
    if backend != "envpool":
        return
    if not cfg.hardware.batched_sampling:
        raise ConfigError("hardware.vector_backend", backend, "'auto' unless hardware.batched_sampling=true (EnvPool steps whole batches)")
    if cfg.env.family != "gym":
        raise ConfigError("hardware.vector_backend", backend, f"'auto' or 'sync' for the {cfg.env.family!r} env family (EnvPool builds gym-family ids only)")
    try:
        envpool = importlib.import_module("envpool")
    except ImportError:
        raise ConfigError("hardware.vector_backend", backend, "'auto' or 'sync': envpool is not installed (pip install envpool)") from None
    tasks = envpool.list_all_envs()
    if cfg.env.id not in tasks:
        close = difflib.get_close_matches(str(cfg.env.id), tasks, n=5, cutoff=0.5)
        raise ConfigError("env.id", cfg.env.id, f"an EnvPool task with hardware.vector_backend=envpool (close matches: {close or tasks[:5]})")


def make_vector_env(cfg, num_envs: int, seed) -> VectorEnv:
    """Not reset yet: the caller resets it with its seed."""
    backend = cfg.hardware.vector_backend
    if backend == "envpool":
        return _envpool(cfg.env, num_envs, seed)
    if backend == "auto" and cfg.env.family == "gym" and _has_native_vector(cfg.env.id):
        return _native(cfg.env, num_envs, seed)
    return _sync(cfg.env, num_envs, seed)


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


def _has_native_vector(env_id: str) -> bool:
    return gym.spec(_gym_id(env_id)).vector_entry_point is not None


def _native(env_cfg, num_envs: int, seed) -> VectorEnv:
    vec = gym.make_vec(_gym_id(env_cfg.id), num_envs=num_envs, vectorization_mode="vector_entry_point", **_env_kwargs(env_cfg))
    mode = vec.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode not in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
        raise ValueError(f"{env_cfg.id}: its vector env resets with {mode}, which batched sampling does not handle")
    return VectorEnv(vec, vec.single_observation_space, vec.single_action_space, mode == gym.vector.AutoresetMode.NEXT_STEP)


def _sync(env_cfg, num_envs: int, seed) -> VectorEnv:
    from sf_hydra.envs import make_env

    factories = [partial(make_env, env_cfg, seed=None if seed is None else seed + i) for i in range(num_envs)]
    vec = gym.vector.SyncVectorEnv(factories, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return VectorEnv(vec, vec.single_observation_space, vec.single_action_space, False)


def _envpool(env_cfg, num_envs: int, seed) -> VectorEnv:
    import envpool

    vec = envpool.make(str(env_cfg.id), env_type="gymnasium", num_envs=num_envs, seed=int(seed or 0), **_env_kwargs(env_cfg))
    return VectorEnv(vec, vec.observation_space, vec.action_space, True)
