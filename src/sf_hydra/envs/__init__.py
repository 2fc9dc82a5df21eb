"""Env families and the registry that builds envs from the `env` config node."""

from sf_hydra.envs.registry import family_names, get_family, make_env, register_family

__all__ = ["family_names", "get_family", "make_env", "register_family"]
