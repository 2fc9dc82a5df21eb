"""Registers the `doom` family: ViZDoom scenarios (`env=doom/basic`) built from a DoomEnvConfig.

Importing this module needs the `vizdoom` package.
"""

from __future__ import annotations

from typing import Optional

from sf_hydra.envs.doom.env import DoomEnv
from sf_hydra.envs.doom.game import known_scenarios, resolve_scenario, single_player_scenarios
from sf_hydra.envs.registry import register_family


def make_doom_env(env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None) -> DoomEnv:
    """DoomEnvConfig -> DoomEnv. Reads the keys with attributes (DictConfig or dataclass)."""
    return DoomEnv(
        scenario=env_cfg.id,
        frameskip=env_cfg.frameskip,
        resolution=env_cfg.resolution,
        downsample=env_cfg.downsample,
        grayscale=env_cfg.grayscale,
        episode_timeout=env_cfg.episode_timeout,
        max_episode_steps=env_cfg.max_episode_steps,
        seed=seed,
        render_mode=render_mode,
        game_settings=dict(env_cfg.kwargs or {}),
    )


register_family("doom", make_doom_env, known_scenarios)

__all__ = ["DoomEnv", "make_doom_env", "known_scenarios", "single_player_scenarios", "resolve_scenario"]
