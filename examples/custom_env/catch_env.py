"""An env family of your own: `catch`, named by its dotted path in your own yaml.

A ball falls one row per step down a height x width grid; the agent moves a paddle along
the bottom row (left, stay, right) and gets +1 for a catch, -1 for a miss. The episode ends
when the ball reaches the bottom. Observations are one-channel images: ball and paddle = 1.

`CatchFamily` derives from `sf_hydra.envs.EnvFamily`; conf/env/custom/catch.yaml beside this
file names it as `env.factory._target_: examples.custom_env.catch_env.CatchFamily`, and no
file of the package changes.
"""

from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np

from sf_hydra.config import ConfigError
from sf_hydra.envs import EnvFamily
from sf_hydra.envs.episode_info import EPISODE_STATS

SETTINGS = {"width": 5, "height": 8}  # env.kwargs this family understands, with defaults


class CatchEnv(gym.Env):
    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1, height, width), np.float32)
        self.action_space = gym.spaces.Discrete(3)  # left, stay, right
        self.ball_row = self.ball_col = self.paddle = 0

    def _obs(self) -> np.ndarray:
        grid = np.zeros((1, self.height, self.width), np.float32)
        grid[0, self.ball_row, self.ball_col] = 1.0
        grid[0, self.height - 1, self.paddle] = 1.0
        return grid

    def reset(self, *, seed: Optional[int] = None, options=None):
        super().reset(seed=seed)
        self.ball_row, self.ball_col = 0, int(self.np_random.integers(self.width))
        self.paddle = int(self.np_random.integers(self.width))
        return self._obs(), {}

    def step(self, action):
        self.paddle = int(np.clip(self.paddle + int(action) - 1, 0, self.width - 1))
        self.ball_row += 1
        landed = self.ball_row == self.height - 1
        reward = (1.0 if self.ball_col == self.paddle else -1.0) if landed else 0.0
        # A statistic of the finished episode (averaged per policy, e.g. pbt.target_objective=caught).
        info = {EPISODE_STATS: {"caught": float(reward > 0)}} if landed else {}
        return self._obs(), reward, landed, False, info


class CatchFamily(EnvFamily):
    """Builds CatchEnv from `env.kwargs` (width, height)."""

    def make(self, env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None) -> CatchEnv:
        env = CatchEnv(**{**SETTINGS, **dict(env_cfg.kwargs or {})})
        env.reset(seed=seed)
        return env

    def episode_stats(self, env_cfg):
        """What its episodes report at their end (info["episode_extra_stats"])."""
        return ("caught",)

    def validate(self, env_cfg) -> None:
        """Runs before any process starts: a bad setting names its key."""
        for key, value in (env_cfg.kwargs or {}).items():
            if key not in SETTINGS:
                raise ConfigError(f"env.kwargs.{key}", value, f"one of the catch settings {sorted(SETTINGS)}")
            if not isinstance(value, int) or value < 3:
                raise ConfigError(f"env.kwargs.{key}", value, "an integer >= 3")
