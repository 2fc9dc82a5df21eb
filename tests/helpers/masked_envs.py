"""A small env that masks actions through the observation key `action_mask` (as Sample
Factory's envs do) and counts every forbidden action it is given."""

import gymnasium as gym
import numpy as np

PENALTY = -10.0


class MaskedEnv(gym.Env):
    """Discrete(4) actions; each step a random half of them (at least one) is allowed. An
    allowed action earns 1 when it is the highest allowed one, else 0.1. A forbidden action
    ends the episode with reward PENALTY. At every episode's end the env reports how many
    forbidden actions it got (info["episode_extra_stats"]["masked_actions"]: 0 or 1)."""

    N = 4
    LENGTH = 20
    observation_space = gym.spaces.Dict({
        "obs": gym.spaces.Box(0.0, 1.0, (N,), np.float32),
        "action_mask": gym.spaces.Box(0, 1, (N,), np.int8),
    })
    action_space = gym.spaces.Discrete(N)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        mask = (self.np_random.random(self.N) < 0.5).astype(np.int8)
        mask[self.np_random.integers(self.N)] = 1
        self.mask = mask
        return {"obs": mask.astype(np.float32), "action_mask": mask}

    def step(self, action):
        action = int(action)
        self.t += 1
        if not self.mask[action]:
            return self._obs(), PENALTY, True, False, {"episode_extra_stats": {"masked_actions": 1.0}}
        reward = 1.0 if action == int(np.flatnonzero(self.mask).max()) else 0.1
        truncated = self.t >= self.LENGTH
        info = {"episode_extra_stats": {"masked_actions": 0.0}} if truncated else {}
        return self._obs(), reward, False, truncated, info


class BoxMaskedEnv(MaskedEnv):
    """A mask with continuous actions: nothing to mask, refused."""

    action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


class WrongSizeMaskEnv(MaskedEnv):
    """A mask of 4 entries for 5 actions: refused."""

    action_space = gym.spaces.Discrete(5)


gym.register("Masked-v0", entry_point=MaskedEnv)
gym.register("BoxMasked-v0", entry_point=BoxMaskedEnv)
gym.register("WrongSizeMask-v0", entry_point=WrongSizeMaskEnv)
