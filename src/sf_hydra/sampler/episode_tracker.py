"""The return and length of each trajectory row's current game, reported when it ends.

A done ends the learner's episode; it ends the reported one only when the env does not say
that the game goes on (`sf_hydra.envs.episode_info.GAME_CONTINUES`, e.g. Atari's lost
lives), so the statistics users see are whole games. Reported episodes are
`messages.Episode`s: with the agent's index in its env for multi-agent envs (the learner
keeps per-agent statistics) and the policy that played.

With reward shaping of a policy's own (PBT perturbs the env's shaping weights; the rollout worker
adds the difference to the env's reward), each game also reports its true return: the same game's
return without that bonus, i.e. at the env's declared weights, the same scale for every policy
(PBT ranks by it: learner/ppo_learner.py PolicyStats.true_objective). Invariant: a game's
`ret - true_ret` is the sum of the bonuses `add` was given for its steps.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from sf_hydra.sampler.messages import Episode


class EpisodeTracker:
    def __init__(self, rows: int, agents: Optional[np.ndarray] = None):
        """agents: [rows] each row's agent index in its env; None: single-agent rows."""
        self.returns = np.zeros(rows)
        self.bonuses = np.zeros(rows)  # the shaping bonus inside `returns` (0: none added)
        self.shaped = False  # a bonus was ever given: episodes report their true return
        self.lengths = np.zeros(rows, dtype=np.int64)
        self.agents = agents

    def add(self, rows, rewards, steps, bonus=None) -> None:
        """Rewards and step counts (1, or 0 for an inactive agent) of these rows' last step;
        `bonus`: the part of `rewards` the policies' own reward shaping added (None: none)."""
        self.returns[rows] += rewards
        self.lengths[rows] += steps
        if bonus is not None:
            self.bonuses[rows] += bonus
            self.shaped = True

    def drop(self, row: int) -> None:
        """Forgets `row`'s current game unreported (its env was re-created mid-game)."""
        self.returns[row], self.bonuses[row], self.lengths[row] = 0.0, 0.0, 0

    def end(self, row: int, game_continues: bool, episodes: list, policy: int = 0,
            extra: Optional[dict] = None) -> Optional[Episode]:
        """A done of `row`: appends its game to `episodes` and returns it, unless the game goes on."""
        if game_continues:
            return None
        agent = None if self.agents is None else int(self.agents[row])
        stats = {str(k): float(v) for k, v in extra.items()} if extra else None
        ret = float(self.returns[row])
        true_ret = ret - float(self.bonuses[row]) if self.shaped else None
        episode = Episode(ret, int(self.lengths[row]), agent, policy, stats, true_ret)
        episodes.append(episode)
        self.returns[row], self.bonuses[row], self.lengths[row] = 0.0, 0.0, 0
        return episode
