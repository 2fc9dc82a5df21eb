"""Which policy acts for each trajectory row of a worker, decided at each episode start.

Policy ids: `0..N-1` are the trained policies (`algo.num_policies`), `N..N+P-1` the opponent
pool's snapshots (`selfplay.pool_size`): frozen, they act but nothing they do is recorded.

Rows belong to groups: a multi-agent env's agents, or a single-agent env's one row. A
group's *seating* (the policy of each of its seats) is drawn when its next episode starts,
that is when the first of its rows ends the current one; each row takes its seat of the new
seating when its own episode ends (the agents of a multi-agent env usually end together).
Policies therefore change only at episode ends, right after a done. The rules:

- fixed assignment (`fixed`: each row's policy, for the whole run): batched sampling (worker i ->
  policy i mod N), and single-agent envs under `algo.policy_assignment=fixed` (`env_policies`: the
  run's envs in N equal blocks, so that a split of a worker's envs acts for one policy and every
  trajectory holds one policy's steps);
- with an opponent pool: one seat, drawn uniformly, is a trained policy's (drawn uniformly);
  every other seat is a trained policy's with probability `latest_prob` (with
  `mix_policies_in_one_env=false`: the learning seat's policy), else a snapshot's, drawn
  among the pool's filled slots with the odds the learner set for the learning seat's
  policy (`selfplay.opponent_sampling`; uniform odds by default; while the pool is empty: a
  trained policy's);
- `mix_policies_in_one_env=true`: every seat is an independent uniform draw; false: one draw
  for all seats of the env.

A game whose seats all ended their episode, played by at least two distinct players (trained
policies or snapshots), is reported whole (sf_hydra/core/game_results.py Game): the learner derives each
trained policy's outcome against the pool from it and rates every player.
"""

from __future__ import annotations

from typing import List, Optional, Protocol, Sequence, Tuple

import numpy as np

from sf_hydra.core.game_results import Game


class PoolView(Protocol):
    """What the mapping reads of the opponent pool when it draws a seating."""

    def filled(self) -> List[int]:
        """The pool's slots (0..P-1) that hold a snapshot now."""

    def generation(self, slot: int) -> int:
        """The generation of the snapshot in `slot` (0: empty)."""

    def odds(self, policy: int) -> np.ndarray:
        """[P] non-negative weights: how likely each slot is drawn as trained policy `policy`'s opponent."""


class NoPool:
    """The pool of a run without one."""

    def filled(self) -> List[int]:
        return []

    def generation(self, slot: int) -> int:
        return 0

    def odds(self, policy: int) -> np.ndarray:
        return np.zeros(0)


class PolicyMapping:
    def __init__(self, group_sizes: Sequence[int], num_policies: int, mix: bool = True, pool_size: int = 0,
                 latest_prob: float = 1.0, rng: Optional[np.random.Generator] = None,
                 fixed: Optional[Sequence[int]] = None):
        """fixed: each row's policy for the whole run (None: seatings drawn per episode)."""
        self.num_policies, self.mix, self.pool_size = num_policies, mix, pool_size
        self.latest_prob = latest_prob
        self.rng = rng if rng is not None else np.random.default_rng()
        self.sizes = list(group_sizes)
        self.row_group = np.repeat(np.arange(len(self.sizes)), self.sizes)
        self.row_seat = np.concatenate([np.arange(s) for s in self.sizes]) if self.sizes else np.zeros(0, int)
        rows = int(sum(self.sizes))
        self.fixed = None if fixed is None else np.asarray(fixed, dtype=np.int64)
        if self.fixed is not None and self.fixed.shape != (rows,):
            raise ValueError(f"fixed policies for {len(self.fixed)} rows, the worker has {rows}")
        self.policy = np.zeros(rows, dtype=np.int64)  # the policy acting for each row now
        self._playing: List[np.ndarray] = []  # per group: the seating of the episode its rows play
        self._next: List[Optional[np.ndarray]] = [None] * len(self.sizes)  # drawn for the next episode
        self._ended: List[dict] = [{} for _ in self.sizes]  # per group: seat -> return, this episode
        self.pool: PoolView = NoPool()

    @property
    def trivial(self) -> bool:
        """One trained policy and no pool: every row is policy 0 forever."""
        return self.num_policies == 1 and self.pool_size == 0

    def start(self, pool: Optional[PoolView] = None) -> None:
        """Draws every group's first seating; `pool` is read whenever a seating is drawn or a game ends."""
        self.pool = pool if pool is not None else NoPool()
        self._playing = [self._draw(g) for g in range(len(self.sizes))]
        for g, seating in enumerate(self._playing):
            self.policy[self.row_group == g] = seating

    def _draw(self, g: int) -> np.ndarray:
        """Group g's seating for its next episode."""
        n, rng, size = self.num_policies, self.rng, self.sizes[g]
        if self.fixed is not None:
            return self.fixed[self.row_group == g].copy()
        if not self.mix:
            seating = np.full(size, rng.integers(n), dtype=np.int64)
        else:
            seating = rng.integers(n, size=size).astype(np.int64)
        filled = self.pool.filled() if self.pool_size > 0 and size > 1 else []
        if filled:
            learning_seat = rng.integers(size)
            p = opponent_probabilities(self.pool.odds(int(seating[learning_seat])), filled)
            for seat in range(size):
                if seat != learning_seat and rng.random() >= self.latest_prob:
                    seating[seat] = n + filled[rng.choice(len(filled), p=p)]
        return seating

    def state(self) -> dict:
        """What a rollout changes: each row's policy, the seatings played and drawn, the returns of the round,
        the generator (serial mode's resumable state: SingleAgentWorker.snapshot)."""
        return {"policy": self.policy.copy(), "playing": [p.copy() for p in self._playing],
                "next": [None if p is None else p.copy() for p in self._next],
                "ended": [dict(e) for e in self._ended], "rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self.policy[...] = state["policy"]
        self._playing, self._next, self._ended = state["playing"], state["next"], state["ended"]
        self.rng.bit_generator.state = state["rng"]

    def episode_end(self, row: int, episode_return: float, games: list) -> int:
        """`row` ended its episode (a whole game) with this return: it takes its seat of the
        group's next seating; returns its new policy. A finished game of two or more distinct
        players is appended to `games` (a Game)."""
        g, seat = int(self.row_group[row]), int(self.row_seat[row])
        ended = self._ended[g]
        if seat in ended:  # this row ends a second episode before the others ended one: a new round
            self._close_round(g, games)
            ended = self._ended[g]
        if self._next[g] is None:
            self._next[g] = self._draw(g)
        ended[seat] = episode_return
        if len(ended) == self.sizes[g]:
            self._close_round(g, games)
        self.policy[row] = self._seating_for(g)[seat]
        return int(self.policy[row])

    def _seating_for(self, g: int) -> np.ndarray:
        return self._next[g] if self._next[g] is not None else self._playing[g]

    def _close_round(self, g: int, games: list) -> None:
        """Every seat of group g ended the episode it played (or a seat began a new one): report
        the game, start the next one."""
        game = self._game(self._playing[g], self._ended[g])
        if game is not None:
            games.append(game)
        if self._next[g] is not None:
            self._playing[g] = self._next[g]
        self._next[g], self._ended[g] = None, {}

    def _game(self, seating: np.ndarray, returns: dict) -> Optional[Game]:
        """The game of `seating` if every seat has its return and two or more distinct players sat."""
        if len(returns) < len(seating):
            return None
        n = self.num_policies
        generations = tuple(0 if p < n else self.pool.generation(int(p) - n) for p in seating)
        if len(set(zip(seating.tolist(), generations))) < 2:
            return None
        return Game(tuple(int(p) for p in seating), generations, tuple(float(returns[s]) for s in range(len(seating))))


def env_policies(num_workers: int, envs_per_worker: int, num_policies: int) -> Tuple[int, ...]:
    """Each env's policy under `algo.policy_assignment=fixed`, worker by worker: the run's envs in
    `num_policies` contiguous blocks of equal size (validated: the envs are a multiple of the policies),
    policy 0 first. Contiguous, so that a worker's envs, and each split of them, act for as few policies
    as can be: a split of one policy acts in one forward, and its trajectories hold that policy's steps
    only (nothing for the learner to mask, no slot shared by two learners)."""
    envs = num_workers * envs_per_worker
    return tuple(e * num_policies // envs for e in range(envs))


def opponent_probabilities(odds: np.ndarray, filled: Sequence[int]) -> np.ndarray:
    """The probability of drawing each of the `filled` slots from their odds; uniform where the
    odds are missing, not finite or all zero."""
    w = np.asarray(odds, dtype=np.float64)[list(filled)] if len(odds) else np.ones(len(filled))
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        w = np.ones(len(filled))
    return w / w.sum()
