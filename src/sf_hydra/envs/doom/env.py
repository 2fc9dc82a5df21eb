"""One ViZDoom scenario as a gymnasium.Env with channel-first uint8 pixel observations."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import gymnasium as gym
import numpy as np

from sf_hydra.config.errors import ConfigError
from sf_hydra.envs.doom.actions import make_action_mapping
from sf_hydra.envs.doom.frames import as_chw, downsample, obs_shape
from sf_hydra.envs.doom.game import build_game, to_vizdoom_seed

DOOM_TICRATE = 35  # engine tics per second


class DoomEnv(gym.Env):
    """Observation Box(0, 255, (C, H, W), uint8); Discrete one-button actions.

    Rewards are the scenario's own, summed over the `frameskip` tics of a step (the
    sampler applies `reward_scale`). An episode that ends on the scenario's timeout is
    truncated; one that ends by death or by the scenario's own goal is terminated.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": DOOM_TICRATE}

    def __init__(
        self,
        scenario: str,
        frameskip: int = 4,
        resolution: str = "256x144",
        downsample: int = 2,
        grayscale: bool = False,
        episode_timeout: Optional[int] = None,
        max_episode_steps: Optional[int] = None,
        seed: Optional[int] = None,
        render_mode: Optional[str] = None,
        game_settings: Optional[Mapping[str, Any]] = None,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError("render_mode", render_mode, f"ViZDoom runs headless: use one of {self.metadata['render_modes']} or None")
        if int(frameskip) < 1:
            raise ConfigError("env.frameskip", frameskip, "an integer >= 1")
        if int(downsample) < 1:
            raise ConfigError("env.downsample", downsample, "an integer >= 1 (1: no downsampling)")
        self.scenario = scenario
        self.frameskip = int(frameskip)
        self.factor = int(downsample)
        self.max_episode_steps = max_episode_steps
        self.render_mode = render_mode
        self.metadata = dict(self.metadata, render_fps=DOOM_TICRATE / self.frameskip)

        self.game = build_game(scenario, resolution, grayscale, episode_timeout, seed, game_settings)
        self._closed = False
        self.actions = make_action_mapping(self.game.get_available_buttons())
        self.action_space = self.actions.space
        channels = 1 if grayscale else 3
        shape = obs_shape(channels, self.game.get_screen_height(), self.game.get_screen_width(), self.factor)
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)

        self._frame: Optional[np.ndarray] = None  # last full-resolution (C, H, W) frame
        self._obs = np.zeros(shape, np.uint8)  # last observation, repeated once the episode is over
        self._steps = 0

    # -- gymnasium API -------------------------------------------------------------

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        if seed is not None:
            self.game.set_seed(to_vizdoom_seed(seed))
        self.game.new_episode()
        self._steps = 0
        self._observe()
        return self._obs, {}

    def step(self, action):
        reward = self.game.make_action(self.actions.to_buttons(action), self.frameskip)
        self._steps += 1
        game = self.game
        terminated = truncated = False
        if game.is_episode_finished():
            # The state is None now: the observation stays the last frame seen.
            if game.is_player_dead() or not game.is_episode_timeout_reached():
                terminated = True
            else:
                truncated = True
        else:
            self._observe()
            if self.max_episode_steps is not None and self._steps >= self.max_episode_steps:
                truncated = True
        return self._obs, float(reward), terminated, truncated, {}

    def render(self):
        """rgb_array: the last full-resolution frame, (H, W, 3) uint8."""
        if self.render_mode != "rgb_array" or self._frame is None:
            return None
        frame = self._frame
        if frame.shape[0] == 1:
            frame = np.repeat(frame, 3, axis=0)
        return np.ascontiguousarray(frame.transpose(1, 2, 0))

    def close(self):
        if not self._closed:
            self._closed = True
            self.game.close()

    # -- internals -----------------------------------------------------------------

    def _observe(self) -> None:
        state = self.game.get_state()
        if state is None:  # not expected while the episode runs; keep the last observation
            return
        self._frame = as_chw(state.screen_buffer)
        self._obs = downsample(self._frame, self.factor)

    def __del__(self):
        # Best effort: a forgotten env must not leave a vizdoom process behind.
        try:
            self.close()
        except Exception:
            pass
