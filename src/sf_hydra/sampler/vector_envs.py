"""Vectorized envs for `hardware.batched_sampling=true`: one object steps a whole split of
envs per call, so the worker's per-env Python loop disappears.

Backends (`hardware.vector_backend`):
- `auto`: the env family's own vector env when it offers one for this env (the gym family:
  the id's vectorized version, e.g. CartPole-v1's numpy `CartPoleVectorEnv`), else `sync`.
- `sync`: gymnasium's `SyncVectorEnv` over envs from the env family's factory (any family).
- any backend the family lists in `vector_backends` (the gym family: `envpool`).

Each is returned with its per-env spaces and whether it resets envs "next step" (the step
after a done ignores the action and returns the first observation of the new episode:
the agent-rows worker then treats that step as an inactive transition).
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym

from sf_hydra.core.errors import ConfigError
from sf_hydra.envs import VectorEnv, env_family, make_env

GENERIC_BACKENDS = ("auto", "sync")  # every family has these; a family may offer more


def check_batched_sampling(cfg) -> None:
    """Raises ConfigError for an unusable backend choice, before any process starts."""
    backend = cfg.hardware.vector_backend
    if backend in GENERIC_BACKENDS:
        return
    family = env_family(cfg.env)
    if backend not in family.vector_backends:
        allowed = [*GENERIC_BACKENDS, *family.vector_backends]
        raise ConfigError("hardware.vector_backend", backend,
                          f"one of {allowed} (what the {cfg.env.family!r} env family offers)")
    if not cfg.hardware.batched_sampling:
        raise ConfigError("hardware.vector_backend", backend,
                          f"'auto' unless hardware.batched_sampling=true ({backend} steps whole batches)")
    family.check_vector_backend(cfg.env, backend)


def make_vector_env(env_cfg, backend: str, num_envs: int, seed) -> VectorEnv:
    """`num_envs` envs of `env_cfg` as one vector env of `backend` (hardware.vector_backend), not reset yet:
    the caller resets it with its seed."""
    vec = None if backend == "sync" else env_family(env_cfg).make_vector(env_cfg, num_envs, seed, backend)
    return vec if vec is not None else _sync(env_cfg, num_envs, seed)


def _sync(env_cfg, num_envs: int, seed) -> VectorEnv:
    factories = [partial(make_env, env_cfg, seed=None if seed is None else seed + i) for i in range(num_envs)]
    vec = gym.vector.SyncVectorEnv(factories, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return VectorEnv(vec, vec.single_observation_space, vec.single_action_space, False)
