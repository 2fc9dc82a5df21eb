"""Envs that fail on purpose, registered with gymnasium so that a worker process can build
them from an id like "tests.helpers.faulty_envs:CrashingCartPole-v0"."""

import os
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


class CrashingOnRank1CartPole(CrashingCartPole):
    """Crashes as CrashingCartPole in the sampler of learner rank 1 only (its processes inherit LOCAL_RANK=1)."""

    def step(self, action):
        if os.environ.get("LOCAL_RANK") != "1":
            return CartPoleEnv.step(self, action)
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


class BrokenInitCartPole(CartPoleEnv):
    """Raises while being built: stands for a simulator that cannot start (a missing asset, a bad path)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        raise FileNotFoundError("broken-init: the simulator's asset file is missing")


class BrokenResetCartPole(CartPoleEnv):
    """Builds, then raises on reset()."""

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("broken-reset: the simulator refused to reset")


class SlowInitCartPole(CartPoleEnv):
    """Takes `init_seconds` to build: a start-up that can be interrupted."""

    def __init__(self, init_seconds: float = 30.0, **kwargs):
        time.sleep(init_seconds)
        super().__init__(**kwargs)


gym.register("BrokenInitCartPole-v0", entry_point=BrokenInitCartPole, max_episode_steps=500)
gym.register("BrokenResetCartPole-v0", entry_point=BrokenResetCartPole, max_episode_steps=500)
gym.register("SlowInitCartPole-v0", entry_point=SlowInitCartPole, max_episode_steps=500)
gym.register("CrashingCartPole-v0", entry_point=CrashingCartPole, max_episode_steps=500)
gym.register("CrashingOnRank1CartPole-v0", entry_point=CrashingOnRank1CartPole, max_episode_steps=500)
gym.register("HangingCartPole-v0", entry_point=HangingCartPole, max_episode_steps=500)
