"""The two pieces of the standard Atari protocol that gymnasium has no wrapper for.

Both sit on top of gymnasium's AtariPreprocessing, so one of their steps is one agent step
(`env.frameskip` frames). gymnasium's `terminal_on_life_loss` is not used for episodic life:
it restarts the whole game after every lost life, so an agent would never see the later
lives' states (e.g. a half-cleared Breakout wall).
"""

from __future__ import annotations

import gymnasium as gym

# Set on a lost life that is not the last: the learner's episode ends, the game's does not
# (the reported return and length span all lives; see sf_hydra/envs/episode_info.py).
from sf_hydra.envs.episode_info import GAME_CONTINUES


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode for the learner (no value bootstrapped across a death);
    the following reset continues the same game with one no-op step unless it is over."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        self.noop = meanings.index("NOOP") if "NOOP" in meanings else None  # None: a real reset after each life
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if not self.game_over and lives < self.lives:
            terminated = True
            info = {**info, GAME_CONTINUES: True}
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed=None, options=None):
        obs, info = None, {}
        if not self.game_over and seed is None and self.noop is not None:
            obs, _, terminated, truncated, info = self.env.step(self.noop)
            if terminated or truncated:
                obs = None
        if obs is None:
            obs, info = self.env.reset(seed=seed, options=options)
        self.game_over = False
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Presses FIRE after every reset: games such as Breakout stand still until it is pressed,
    and a policy that has not yet learned to press it would see nothing happen."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.fire = env.unwrapped.get_action_meanings().index("FIRE")

    def reset(self, *, seed=None, options=None):
        _, info = self.env.reset(seed=seed, options=options)
        obs, _, terminated, truncated, step_info = self.env.step(self.fire)
        if terminated or truncated:
            return self.env.reset(options=options)
        return obs, {**info, **step_info}
