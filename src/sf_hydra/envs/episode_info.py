"""Info keys that change how episodes are reported, not how they are learned.

`info[GAME_CONTINUES] = True` on a step that ends the learner's episode (terminated or
truncated) says that the game itself goes on after the next reset: e.g. Atari's episodic
life, where a lost life ends the learner's episode (no value bootstrapped across a death)
but the game's score, which is what users and papers compare, spans all lives. The
rollout workers and `enjoy` then keep adding the next episodes' rewards and steps to the
same game and report it once, when a done comes without the flag. Any env may set it (a
multi-agent env in an agent's own info); an env that never sets it reports every episode.
"""

from __future__ import annotations

GAME_CONTINUES = "game_continues"
# info[EPISODE_STATS] on the step that ends a game: {name: float}, statistics of the finished
# game (Doom's frags, ...), averaged per policy like the return; pbt.target_objective may name one.
EPISODE_STATS = "episode_extra_stats"


# info[SHAPING_UNITS] on every step of an env whose family declares reward shaping
# (EnvFamily.reward_shaping, {name: [per unit up, per unit down]}): float [2 x V], how many
# units each shaped quantity went up (the first V) and down (the last V) in this step, in the
# declared order. The env's reward already holds them at the declared weights; a policy with
# weights of its own (PBT perturbs them) gets the difference added by the rollout worker.
SHAPING_UNITS = "reward_shaping_units"


def episode_stats(info):
    """The finished game's statistics from a done step's info, or None."""
    return info.get(EPISODE_STATS) if info else None


def game_continues(info) -> bool:
    """True when this done ends a part of a game (a life), not the game."""
    return bool(info.get(GAME_CONTINUES, False)) if info else False
