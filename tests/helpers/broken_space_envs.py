"""An env that breaks its declared observation space mid-episode, registered with gymnasium so that a worker
process builds it from an id like "tests.helpers.broken_space_envs:GrowingObsCartPole-v0"."""

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class GrowingObsCartPole(CartPoleEnv):
    """CartPole (its observation space declares 4 values) whose step number `at` of an episode returns an
    observation of `size` values, and every step after in that episode."""

    def __init__(self, at: int = 5, size: int = 7, **kwargs):
        super().__init__(**kwargs)
        self.at, self.size, self.t = at, size, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.t += 1
        if self.t >= self.at:
            obs = np.resize(obs, self.size).astype(np.float32)
        return obs, reward, terminated, truncated, info


gym.register("GrowingObsCartPole-v0", entry_point=GrowingObsCartPole, max_episode_steps=500)
