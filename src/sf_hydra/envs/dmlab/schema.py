"""Typed `env` node of the dmlab family."""

from dataclasses import dataclass

from sf_hydra.config.schema import EnvConfig


@dataclass
class DmlabEnvConfig(EnvConfig):
    family: str = "dmlab"
