"""Agent actions -> ViZDoom button vectors.

A mapping owns the gymnasium action space and turns one agent action into the list of
button values `DoomGame.make_action` expects (one value per available button, in the
scenario's order). Only the discrete "one button at a time" mapping exists now; a richer
one (button combinations, Tuple/MultiDiscrete with turn deltas for the deathmatch
scenarios) is another class with the same two members, chosen in `make_action_mapping`.
"""

from __future__ import annotations

from typing import List, Sequence

import gymnasium as gym


class OneButtonActions:
    """Discrete(n_buttons + 1): action 0 presses nothing, action i presses button i - 1 only.

    A delta button (TURN_LEFT_RIGHT_DELTA, ...) pressed this way gets the value 1, i.e. a
    one-unit move; such buttons need the richer mapping to be useful.
    """

    def __init__(self, buttons: Sequence):
        self.buttons = list(buttons)
        n = len(self.buttons)
        self.space = gym.spaces.Discrete(n + 1)
        # Built once: make_action accepts a list of floats; index by action id.
        self._table: List[List[float]] = [[0.0] * n]
        for i in range(n):
            row = [0.0] * n
            row[i] = 1.0
            self._table.append(row)

    def to_buttons(self, action) -> List[float]:
        return self._table[int(action)]

    def names(self) -> List[str]:
        """Human-readable meaning of each action id (for logs and enjoy)."""
        return ["NOOP"] + [getattr(b, "name", str(b)) for b in self.buttons]


def make_action_mapping(buttons: Sequence) -> OneButtonActions:
    return OneButtonActions(buttons)
