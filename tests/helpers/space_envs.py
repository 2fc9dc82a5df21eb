"""A small env with a Dict observation (an image and a vector) and a MultiDiscrete action,
to run the sampler's general allocation path end to end."""

import gymnasium as gym
import numpy as np


class DictObsEnv(gym.Env):
    """Reward 1 when the first action component matches the sign of vec[0]."""

    observation_space = gym.spaces.Dict({
        "image": gym.spaces.Box(0, 255, (3, 36, 36), np.uint8),
        "vec": gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
    })
    action_space = gym.spaces.MultiDiscrete([2, 3])

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        self.vec = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        image = self.np_random.integers(0, 255, (3, 36, 36), dtype=np.uint8)
        return {"image": image, "vec": self.vec}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), action
        reward = float(int(action[0]) == int(self.vec[0] > 0))
        self.t += 1
        return self._obs(), reward, False, self.t >= 20, {}


gym.register("DictObs-v0", entry_point=DictObsEnv)
