"""Small gymnasium wrappers that any env family may apply."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from sf_hydra.envs.episode_info import EPISODE_STATS


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


class EpisodeCounter(gym.Wrapper):
    """`env.episode_counter`: the step that ends an episode adds `episode_number` (this env's
    episodes before it: 0, 1, ...) to the episode's statistics (info["episode_extra_stats"])."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.episodes = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info = dict(info)
            info[EPISODE_STATS] = {**(info.get(EPISODE_STATS) or {}), "episode_number": float(self.episodes)}
            self.episodes += 1
        return obs, reward, terminated, truncated, info


def _is_image(space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


def _chw_space(space: gym.spaces.Box) -> gym.spaces.Box:
    return gym.spaces.Box(space.low.transpose(2, 0, 1), space.high.transpose(2, 0, 1), dtype=space.dtype)


class ChannelsFirst(gym.ObservationWrapper):
    """`env.pixel_format=HWC`: the env's image observations (3-D Boxes, alone or in a Dict) are
    (H, W, C); they leave it as (C, H, W), the layout the conv encoder takes."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        if isinstance(space, gym.spaces.Dict):
            self.keys = [k for k, s in space.spaces.items() if _is_image(s)]
            self.observation_space = gym.spaces.Dict(
                {k: _chw_space(s) if k in self.keys else s for k, s in space.spaces.items()})
        else:
            self.keys = None if _is_image(space) else []
            if self.keys is None:
                self.observation_space = _chw_space(space)

    # A view, not a copy: the rollout worker copies each observation into its arrays anyway, and
    # that one copy does the transpose (no extra pass over the pixels).
    def observation(self, obs):
        if self.keys is None:
            return np.moveaxis(obs, 2, 0)
        if not self.keys:
            return obs
        return {k: np.moveaxis(v, 2, 0) if k in self.keys else v for k, v in obs.items()}
