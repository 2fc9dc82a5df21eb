"""Agent actions -> ViZDoom button vectors.

A mapping owns the gymnasium action space, the buttons the game must make available (in
order), and turns one agent action into the list of button values `DoomGame.make_action`
expects. Two mappings, chosen by the `env.actions` config:

- OneButtonActions: Discrete(1 + n), no-op or one button (the scenario's own buttons).
- ButtonGroupActions: Tuple of Discrete, one per group of mutually exclusive buttons
  (move forward/back, strafe, attack, ...) plus optionally the turn speed
  (TURN_LEFT_RIGHT_DELTA) discretized into bins, as in the Sample Factory paper.
"""

from __future__ import annotations

from typing import List, Sequence

import gymnasium as gym
import numpy as np

TURN_DELTA = "TURN_LEFT_RIGHT_DELTA"


def _name(button) -> str:
    return getattr(button, "name", str(button))


class OneButtonActions:
    """Discrete(n_buttons + 1): action 0 presses nothing, action i presses button i - 1 only.

    A delta button (TURN_LEFT_RIGHT_DELTA, ...) pressed this way gets the value 1, i.e. a
    one-unit move; such buttons need ButtonGroupActions' turn bins to be useful.
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
        return ["NOOP"] + [_name(b) for b in self.buttons]


class ButtonGroupActions:
    """Tuple(Discrete(1 + len(g)) for g in groups [, Discrete(turn_bins)]).

    In each group, 0 presses nothing and i presses the group's i-th button; buttons of
    different groups are pressed together. The last component, if any, sets the turn
    speed to one of `turn_bins` values evenly spaced in [-turn_max, turn_max] degrees per
    tic (held for all the frameskip tics of a step; positive turns right).
    """

    def __init__(self, groups: Sequence[Sequence], turn_delta_button=None, turn_bins: int = 0, turn_max: float = 10.0):
        self.groups = [list(g) for g in groups]
        self.buttons = [b for g in self.groups for b in g]
        self._offsets = list(np.cumsum([0] + [len(g) for g in self.groups[:-1]]).astype(int)) if self.groups else []
        sizes = [len(g) + 1 for g in self.groups]
        self._turns: List[float] = []
        if turn_bins:
            self.buttons.append(turn_delta_button)
            self._turns = np.linspace(-turn_max, turn_max, turn_bins).tolist()
            sizes.append(turn_bins)
        self.space = gym.spaces.Tuple([gym.spaces.Discrete(n) for n in sizes])

    def to_buttons(self, action) -> List[float]:
        values = [0.0] * len(self.buttons)
        for offset, a in zip(self._offsets, action):
            if a:
                values[offset + int(a) - 1] = 1.0
        if self._turns:
            values[-1] = self._turns[int(action[-1])]
        return values

    def names(self) -> List[List[str]]:
        """Per component, the meaning of each of its values."""
        out = [["NOOP"] + [_name(b) for b in g] for g in self.groups]
        if self._turns:
            out.append([f"TURN {t:+.1f}" for t in self._turns])
        return out


def make_action_mapping(scenario_buttons: Sequence, groups: Sequence[Sequence] = (), turn_delta_button=None,
                        turn_bins: int = 0, turn_max: float = 10.0):
    """The mapping for the config: one button at a time over the scenario's own buttons
    when no groups are given; a single group without turning is that, too."""
    if not groups:
        return OneButtonActions(scenario_buttons)
    if len(groups) == 1 and not turn_bins:
        return OneButtonActions(groups[0])
    return ButtonGroupActions(groups, turn_delta_button, turn_bins, turn_max)
