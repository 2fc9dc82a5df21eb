"""Small gymnasium wrappers that any env family may apply."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class ActionRepeat(gym.Wrapper):
    """Repeats each action `repeat` times and sums the rewards (`env.frameskip` for envs that
    have no frame skip of their own); stops early when the episode ends."""

    def __init__(self, env: gym.Env, repeat: int):
        super().__init__(env)
        if repeat < 1:
            raise ValueError(f"repeat={repeat}: must be >= 1")
        self.repeat = repeat

    def step(self, action):
        total = 0.0
        for _ in range(self.repeat):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


def float32_observations(env: gym.Env) -> gym.Env:
    """Casts a float64 Box observation to float32 (the bounds too, so gymnasium does not warn
    about lost precision in every worker)."""
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or space.dtype == np.float32:
        return env
    space32 = gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), space.shape, np.float32)
    return gym.wrappers.TransformObservation(env, lambda obs: np.asarray(obs, dtype=np.float32), space32)
