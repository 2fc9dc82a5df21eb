"""Env families and the one entry point that builds envs from the `env` config node."""

from sf_hydra.envs.family import (
    EnvFamily,
    VectorEnv,
    check_env,
    env_family,
    episode_stats,
    make_env,
    make_envs,
    reward_shaping,
)

__all__ = ["EnvFamily", "VectorEnv", "check_env", "env_family", "episode_stats", "make_env", "make_envs",
           "reward_shaping"]
