"""Envs that fail on purpose, registered with gymnasium so that a worker process can build
them from an id like "tests.helpers.faulty_envs:CrashingCartPole-v0"."""

import time

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class CrashingCartPole(CartPoleEnv):
    """Raises after `crash_after` steps: stands for an env that crashes mid-training."""

    def __init__(self, crash_after: int = 300, **kwargs):
        super().__init__(**kwargs)
        self.crash_after, self.steps = crash_after, 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.crash_after:
            raise RuntimeError("boom: the simulator crashed")
        return super().step(action)


class HangingCartPole(CartPoleEnv):
    """Blocks forever after `hang_after` steps: stands for a stuck simulator."""

    def __init__(self, hang_after: int = 300, **kwargs):
        super().__init__(**kwargs)
        self.hang_after, self.steps = hang_after, 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.hang_after:
            time.sleep(3600)
        return super().step(action)


gym.register("CrashingCartPole-v0", entry_point=CrashingCartPole, max_episode_steps=500)
gym.register("HangingCartPole-v0", entry_point=HangingCartPole, max_episode_steps=500)
