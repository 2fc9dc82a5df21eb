"""Typed `env` node of the atari family (no ale_py import: the schema must load without it)."""

from dataclasses import dataclass

from sf_hydra.config.schema import EnvConfig


@dataclass
class AtariEnvConfig(EnvConfig):
    family: str = "atari"
