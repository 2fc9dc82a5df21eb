"""Typed `env` node of the atari family (no ale_py import: the schema must load without it).

Defaults are the standard Atari protocol most PPO/APPO results use (Sample Factory, CleanRL,
SB3): frameskip 4 with max-pooling, up to 30 no-ops at reset, 84x84 gray, 4 stacked frames,
end of life = end of episode for the learner, FIRE pressed at reset, no sticky actions,
108k-frame episode cap. Rewards are clipped by the shared `env.reward_clip` key (1 for
Atari, see conf/env_family/atari.yaml): clipping there happens on the learner's side only,
so the returns reported stay the true game score.
"""

from dataclasses import dataclass
from typing import Optional

from sf_hydra.config.schema import EnvConfig


@dataclass
class AtariEnvConfig(EnvConfig):
    """An ALE game by its ROM id (`pong`, `space_invaders`, ...; ale_py ships the ROMs)."""

    family: str = "atari"
    frameskip: int = 4  # done by gymnasium's AtariPreprocessing (max-pool of the last 2 frames)
    noop_max: int = 30  # a random number of no-ops in [1, noop_max] after each reset (0: none)
    frame_stack: int = 4  # observations are the last `frame_stack` frames, channels first
    resolution: str = "84x84"  # WxH of the resized screen
    grayscale: bool = True  # else RGB: 3 channels per stacked frame
    episodic_life: bool = True  # a lost life ends the learner's episode; the game goes on
    fire_reset: bool = True  # press FIRE after each reset (games with a FIRE action only)
    repeat_action_probability: float = 0.0  # sticky actions (Machado et al. 2018 use 0.25)
    full_action_space: bool = False  # all 18 joystick actions instead of the game's minimal set
    max_episode_frames: Optional[int] = 108_000  # ALE frames per game (30 min at 60 Hz); None: no cap
