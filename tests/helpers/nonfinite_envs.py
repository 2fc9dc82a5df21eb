"""Envs that return NaN or infinite values on purpose, registered with gymnasium so that a
worker process builds them from an id like "tests.helpers.nonfinite_envs:NanRewardCartPole-v0"."""

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class NonFiniteCartPole(CartPoleEnv):
    """CartPole whose step number `after` (counted over the env's life) returns `value` as its
    reward (field="reward") or in its observation (field="obs"), and every `every` steps after."""

    def __init__(self, after: int = 200, every: int = 50, field: str = "reward", value: float = float("nan"),
                 **kwargs):
        super().__init__(**kwargs)
        self.after, self.every, self.field, self.value, self.steps = after, every, field, value, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        if self.steps >= self.after and (self.steps - self.after) % self.every == 0:
            if self.field == "reward":
                reward = self.value
            else:
                obs = np.array(obs, copy=True)
                obs[0] = self.value
        return obs, reward, terminated, truncated, info


gym.register("NonFiniteCartPole-v0", entry_point=NonFiniteCartPole, max_episode_steps=500)
