"""A small env with a mixed action space, Tuple(Discrete(3), Box(-1, 1, (1,))): each step
shows a class (one-hot) and a target number; the reward needs both parts right."""

import gymnasium as gym
import numpy as np


class MixedActionEnv(gym.Env):
    """Reward per step: 1 when the discrete part names the shown class, plus 1 - |x - target|
    for the continuous part x (its best: 1 at x = target). 20 steps per episode. Every action
    the env gets is checked against its space (a wrongly laid out action fails loudly). A
    uniformly random policy scores class_hits 1/3 and target_error about 0.75 (N(0, 1) clipped)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (1,), np.float32)))
    LENGTH = 20

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.hits, self.error = 0, 0, 0.0
        return self._obs(), {}

    def _obs(self):
        self.target_class = int(self.np_random.integers(3))
        self.target = float(self.np_random.uniform(-1, 1))
        obs = np.zeros(4, np.float32)
        obs[self.target_class], obs[3] = 1.0, self.target
        return obs

    def step(self, action):
        assert isinstance(action, tuple) and self.action_space.contains(action), action
        choice, x = action
        hit, error = choice == self.target_class, abs(float(x[0]) - self.target)
        self.hits, self.error, self.t = self.hits + hit, self.error + error, self.t + 1
        done = self.t >= self.LENGTH
        # Each part's own score at the episode's end: the share of right classes, the mean distance.
        info = {"episode_extra_stats": {"class_hits": self.hits / self.t, "target_error": self.error / self.t}}
        return self._obs(), float(hit) + 1.0 - error, False, done, info if done else {}


gym.register("MixedAction-v0", entry_point=MixedActionEnv)
