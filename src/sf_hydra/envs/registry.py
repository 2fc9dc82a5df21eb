"""Env families: a name prefix (`gym`, `doom`, ...) mapped to a factory.

A family's factory turns the composed `env` config node into a gymnasium.Env. Users add
their own family with `register_family` from their own module (no package edits needed).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import gymnasium as gym

Factory = Callable[..., gym.Env]


@dataclass(frozen=True)
class EnvFamily:
    name: str
    factory: Factory  # factory(env_cfg, seed=..., render_mode=...) -> gym.Env
    known_names: Callable[[], list]  # for error messages: what this family can build
    validate: Optional[Callable[[Any], None]] = None  # raises ConfigError for a bad env node


_FAMILIES: Dict[str, EnvFamily] = {}
# Built-in families are imported on first use so that e.g. vizdoom stays optional.
_BUILTIN = {
    "gym": "sf_hydra.envs.gym_family",
    "doom": "sf_hydra.envs.doom.family",
    "atari": "sf_hydra.envs.atari.family",
    "mujoco": "sf_hydra.envs.mujoco.family",
    "dmlab": "sf_hydra.envs.dmlab.family",
}


def register_family(name: str, factory: Factory, known_names: Callable[[], list] = list,
                    validate: Optional[Callable[[Any], None]] = None) -> None:
    """`validate(env_cfg)` runs before any process starts; by default `env.id` must be one
    of `known_names()` (when the family lists any) or an existing file."""
    _FAMILIES[name] = EnvFamily(name, factory, known_names, validate or _default_validator(name, known_names))


def _default_validator(family: str, known_names: Callable[[], list]):
    def check(env_cfg) -> None:
        import os

        from sf_hydra.config.errors import ConfigError

        names = known_names()
        if names and env_cfg.id not in names and not os.path.isfile(str(env_cfg.id)):
            raise ConfigError("env.id", env_cfg.id, f"one of the {family!r} family's names {names} (known families: {family_names()})")

    return check


def family_names() -> list:
    return sorted(set(_FAMILIES) | set(_BUILTIN))


def get_family(name: str) -> EnvFamily:
    if name not in _FAMILIES and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])  # registers itself on import
    if name not in _FAMILIES:
        raise KeyError(f"env.family={name!r} is not a known env family: known families are {family_names()}")
    return _FAMILIES[name]


def make_env(env_cfg: Any, seed: Optional[int] = None, render_mode: Optional[str] = None) -> gym.Env:
    """Build one env of the family named by `env_cfg.family`."""
    return get_family(env_cfg.family).factory(env_cfg, seed=seed, render_mode=render_mode)
