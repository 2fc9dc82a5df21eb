"""Rewards for changes of game variables (frags, deaths, hits, health, ...), as Sample
Factory's Doom reward shaping, read from the engine after every step.

Why not ViZDoom's built-in death/health rewards in games where players respawn: in
vizdoom 1.3.2 the death reward is paid at every state update while the player is dead
(-0.75 per step for 2 s of respawn delay, not once), and the health reward pays for the
health a respawn restores. Here a death counts once (DEATHCOUNT goes up by one), and
changes of what a respawn resets (health, armor, weapons, ammo) count for nothing in a
step where the player died or respawned.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from sf_hydra.envs.doom.game import parse_game_variables

RESET_BY_RESPAWN = ("HEALTH", "ARMOR", "AMMO", "WEAPON", "SELECTED_WEAPON")  # name prefixes


class DeltaRewards:
    """weights: {variable: [reward per unit increase, reward per unit decrease]}, e.g.
    {"FRAGCOUNT": [1.0, -1.5], "HEALTH": [0.005, -0.003]} (a decrease of 10 health: -0.03)."""

    def __init__(self, game, weights: Mapping[str, Sequence[float]]):
        self.game = game
        names = list(weights)
        self.variables = parse_game_variables(names + ["DEATHCOUNT"], "env.delta_rewards")
        self.up = np.array([float(weights[n][0]) for n in names])
        self.down = np.array([float(weights[n][1]) for n in names])
        self.body = np.array([n.startswith(RESET_BY_RESPAWN) for n in names])
        # Overkill and telefrags leave HEALTH far below 0 (-999900): dead is dead.
        self.floor = np.array([0.0 if n == "HEALTH" else -np.inf for n in names] + [-np.inf])
        self.previous = np.zeros(len(names) + 1)
        self.was_dead = False
        self.units = np.zeros(2 * len(names))  # the last step's units up (first half) and down

    def start(self) -> None:
        """At the start of an episode: changes are counted from here."""
        self.previous = self._read()
        self.was_dead = self.game.is_player_dead()

    def __call__(self) -> float:
        """The reward for the changes since the last call."""
        now = self._read()
        delta, self.previous = now - self.previous, now
        dead = self.game.is_player_dead()
        died_or_respawned = delta[-1] > 0 or (self.was_dead and not dead)
        self.was_dead = dead
        delta = delta[:-1]
        if died_or_respawned:
            delta = np.where(self.body, 0.0, delta)
        up, down = np.maximum(delta, 0.0), np.maximum(-delta, 0.0)
        self.units = np.concatenate([up, down])
        return float(up @ self.up + down @ self.down)

    def _read(self) -> np.ndarray:
        values = np.array([self.game.get_game_variable(v) for v in self.variables], dtype=np.float64)
        return np.maximum(values, self.floor)
