"""The `atari` family (`AtariFamily`): ALE games by ROM id (`env=atari/pong`) with the standard
preprocessing, built from gymnasium's own Atari wrappers.

Importing this module needs `ale_py` and `cv2` (gymnasium's AtariPreprocessing resizes with
OpenCV): `pip install 'sf_hydra[atari]'`.
"""

from __future__ import annotations

from typing import Optional

import cv2  # noqa: F401  (imported here so that a missing OpenCV is reported at validation)
import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit, TransformObservation

from sf_hydra.envs.atari.games import check_env_config, check_game, parse_resolution
from sf_hydra.envs.atari.wrappers import EpisodicLife, FireReset
from sf_hydra.envs.family import EnvFamily


def _ale(env_cfg, render_mode: Optional[str]) -> AtariEnv:
    """The bare game, one frame per step: AtariPreprocessing does the frame skipping."""
    return AtariEnv(
        game=env_cfg.id,
        obs_type="grayscale" if env_cfg.grayscale else "rgb",  # the screen AtariPreprocessing reads
        frameskip=1,
        repeat_action_probability=env_cfg.repeat_action_probability,
        full_action_space=env_cfg.full_action_space,
        max_num_frames_per_episode=env_cfg.max_episode_frames,
        render_mode=render_mode,
        **dict(env_cfg.kwargs or {}),  # e.g. mode, difficulty
    )


def _channels_first(env: gym.Env) -> gym.Env:
    """RGB stacks come out as (stack, H, W, 3); the conv encoder wants (stack * 3, H, W)."""
    k, h, w, c = env.observation_space.shape
    space = gym.spaces.Box(0, 255, (k * c, h, w), np.uint8)
    return TransformObservation(env, lambda obs: np.ascontiguousarray(obs.transpose(0, 3, 1, 2).reshape(k * c, h, w)),
                                space)


def make_atari_env(env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None) -> gym.Env:
    """AtariEnvConfig -> uint8 observations (frame_stack x channels, H, W), Discrete actions.
    The full check (`check_env_config`) ran at validation; it loads the ROM once more."""
    check_game(env_cfg.id)
    env: gym.Env = _ale(env_cfg, render_mode)
    env = AtariPreprocessing(
        env, noop_max=env_cfg.noop_max, frame_skip=env_cfg.frameskip, screen_size=parse_resolution(env_cfg.resolution),
        terminal_on_life_loss=False, grayscale_obs=env_cfg.grayscale, scale_obs=False,
    )
    if env_cfg.max_episode_steps is not None:  # beneath EpisodicLife: a cut ends the game, not a life
        env = TimeLimit(env, env_cfg.max_episode_steps)
    if env_cfg.episodic_life:
        env = EpisodicLife(env)
    if env_cfg.fire_reset and "FIRE" in env.unwrapped.get_action_meanings():
        env = FireReset(env)
    env = FrameStackObservation(env, env_cfg.frame_stack)
    if not env_cfg.grayscale:
        env = _channels_first(env)
    if seed is not None:
        env.reset(seed=seed)
    return env


class AtariFamily(EnvFamily):
    """`env.id`: an ALE ROM id (`pong`, `space_invaders`, ...)."""

    pixel_formats = ("CHW",)  # its frames are channels first already

    def make(self, env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None) -> gym.Env:
        return make_atari_env(env_cfg, seed=seed, render_mode=render_mode)

    def validate(self, env_cfg) -> None:
        check_env_config(env_cfg)
