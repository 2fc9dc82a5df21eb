"""Typed `env` node of the doom family (no vizdoom import: the schema must load without it)."""

from dataclasses import dataclass
from typing import Optional

from sf_hydra.config.schema import EnvConfig


@dataclass
class DoomEnvConfig(EnvConfig):
    """ViZDoom: a scenario .cfg (from vizdoom.scenarios_path unless a path is given)."""

    family: str = "doom"
    resolution: str = "256x144"  # the engine's render resolution, WxH
    downsample: int = 2  # integer pooling of the rendered frame: 256x144 -> 128x72
    grayscale: bool = False
    episode_timeout: Optional[int] = None  # tics; None keeps the scenario's own
