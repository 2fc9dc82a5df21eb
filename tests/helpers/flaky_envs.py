"""A CartPole that hangs or crashes once, in one chosen env of one chosen rollout worker: it
recognises itself from the seed the worker resets it with (sampler/rollout_worker.env_seed:
seed * 100_003 + worker * 1_009 + env index), so the other envs and workers run normally and
an env re-created after the fault (seeded apart) behaves."""

import time

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class FlakyCartPole(CartPoleEnv):
    def __init__(self, mode: str = "hang", after: int = 300, worker: int = 1, env_index: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.mode, self.after, self.worker, self.env_index = mode, after, worker, env_index
        self.target, self.steps = False, 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.target = (seed % 100_003) // 1_009 == self.worker and (seed % 100_003) % 1_009 == self.env_index
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        if self.target and self.steps > self.after:
            if self.mode == "hang":
                time.sleep(3600)
            raise RuntimeError("boom: the simulator crashed")
        return super().step(action)


gym.register("FlakyCartPole-v0", entry_point=FlakyCartPole, max_episode_steps=500)
