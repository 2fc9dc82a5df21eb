"""The return and length of each trajectory row's current game, reported when it ends.

A done ends the learner's episode; it ends the reported one only when the env does not say
that the game goes on (`sf_hydra.envs.episode_info.GAME_CONTINUES`, e.g. Atari's lost
lives), so the statistics users see are whole games. Reported episodes are
`(return, length)`, or `(return, length, agent)` for the agents of multi-agent envs
(`agent`: the agent's index in its env), from which the learner also keeps per-agent
statistics.
"""

from __future__ import annotations

from typing import Optional

import numpy as np


class EpisodeTracker:
    def __init__(self, rows: int, agents: Optional[np.ndarray] = None):
        """agents: [rows] each row's agent index in its env; None: single-agent rows."""
        self.returns = np.zeros(rows)
        self.lengths = np.zeros(rows, dtype=np.int64)
        self.agents = agents

    def add(self, rows, rewards, steps) -> None:
        """Rewards and step counts (1, or 0 for an inactive agent) of these rows' last step."""
        self.returns[rows] += rewards
        self.lengths[rows] += steps

    def end(self, row: int, game_continues: bool, episodes: list) -> None:
        """A done of `row`: appends its game to `episodes` unless the game goes on."""
        if game_continues:
            return
        episode = (float(self.returns[row]), int(self.lengths[row]))
        episodes.append(episode if self.agents is None else (*episode, int(self.agents[row])))
        self.returns[row], self.lengths[row] = 0.0, 0
