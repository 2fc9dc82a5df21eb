"""Typed `env` node of the mujoco family (no mujoco import: the schema must load without it)."""

from dataclasses import dataclass

from sf_hydra.config.schema import EnvConfig


@dataclass
class MujocoEnvConfig(EnvConfig):
    family: str = "mujoco"
