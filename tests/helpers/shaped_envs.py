"""An env family that declares reward shaping (EnvFamily.reward_shaping): CartPole whose +1
per step is the shaped quantity ALIVE (1 unit up per step, weight 1), reported in
info["reward_shaping_units"] as a Doom env reports its game variables' changes."""

import gymnasium as gym
import numpy as np

from sf_hydra.envs.episode_info import SHAPING_UNITS
from sf_hydra.envs.gym.family import GymFamily


class ReportsAlive(gym.Wrapper):
    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, SHAPING_UNITS: np.array([1.0, 0.0])}


class ShapedCartPoleFamily(GymFamily):
    def make(self, env_cfg, seed=None, render_mode=None):
        return ReportsAlive(super().make(env_cfg, seed=seed, render_mode=render_mode))

    def make_vector(self, env_cfg, num_envs, seed, backend):
        return None  # gymnasium's SyncVectorEnv of `make`: the info arrays are stacked per sub-env

    def reward_shaping(self, env_cfg):
        return {"ALIVE": (1.0, 0.0)}
