"""The return and length of each trajectory row's current game, reported when it ends.

A done ends the learner's episode; it ends the reported one only when the env does not say
that the game goes on (`sf_hydra.envs.episode_info.GAME_CONTINUES`, e.g. Atari's lost
lives), so the statistics users see are whole games. Reported episodes are
`(return, length)`.
"""

from __future__ import annotations

import numpy as np


class EpisodeTracker:
    def __init__(self, rows: int):
        self.returns = np.zeros(rows)
        self.lengths = np.zeros(rows, dtype=np.int64)

    def add(self, rows, rewards, steps) -> None:
        """Rewards and step counts (1, or 0 for an inactive agent) of these rows' last step."""
        self.returns[rows] += rewards
        self.lengths[rows] += steps

    def end(self, row: int, game_continues: bool, episodes: list) -> None:
        """A done of `row`: appends its game to `episodes` unless the game goes on."""
        if game_continues:
            return
        episodes.append((float(self.returns[row]), int(self.lengths[row])))
        self.returns[row], self.lengths[row] = 0.0, 0
