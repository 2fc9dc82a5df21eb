"""Which policy acts for each trajectory row of a worker, decided at each episode start.

Policy ids: `0..N-1` are the trained policies (`algo.num_policies`), `N..N+P-1` the opponent
pool's snapshots (`selfplay.pool_size`): frozen, they act but nothing they do is recorded.

Rows belong to groups: a multi-agent env's agents, or a single-agent env's one row. A
group's *seating* (the policy of each of its seats) is drawn when its next episode starts,
that is when the first of its rows ends the current one; each row takes its seat of the new
seating when its own episode ends (the agents of a multi-agent env usually end together).
Policies therefore change only at episode ends, right after a done. The rules:

- batched sampling (`fixed_policy`): every row of the worker is that policy's, always
  (worker i -> policy i mod N);
- with an opponent pool: one seat, drawn uniformly, is a trained policy's (drawn uniformly);
  every other seat is a trained policy's with probability `latest_prob` (with
  `mix_policies_in_one_env=false`: the learning seat's policy), else a snapshot's, drawn
  uniformly among the pool's filled slots (while the pool is empty: a trained policy's);
- `mix_policies_in_one_env=true`: every seat is an independent uniform draw; false: one draw
  for all seats of the env.

A game where a trained policy's seat played against at least one snapshot gives an outcome
for that policy: a win, a draw or a loss by its return against the best snapshot's return.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import numpy as np

from sf_hydra.metric_names import DRAW, LOSS, WIN


class PolicyMapping:
    def __init__(self, group_sizes: Sequence[int], num_policies: int, mix: bool = True, pool_size: int = 0,
                 latest_prob: float = 1.0, rng: Optional[np.random.Generator] = None,
                 fixed_policy: Optional[int] = None):
        self.num_policies, self.mix, self.pool_size = num_policies, mix, pool_size
        self.latest_prob, self.fixed_policy = latest_prob, fixed_policy
        self.rng = rng if rng is not None else np.random.default_rng()
        self.sizes = list(group_sizes)
        self.row_group = np.repeat(np.arange(len(self.sizes)), self.sizes)
        self.row_seat = np.concatenate([np.arange(s) for s in self.sizes]) if self.sizes else np.zeros(0, int)
        rows = int(sum(self.sizes))
        self.policy = np.zeros(rows, dtype=np.int64)  # the policy acting for each row now
        self._playing: List[np.ndarray] = []  # per group: the seating of the episode its rows play
        self._next: List[Optional[np.ndarray]] = [None] * len(self.sizes)  # drawn for the next episode
        self._ended: List[dict] = [{} for _ in self.sizes]  # per group: seat -> return, this episode
        self._filled: Callable[[], List[int]] = lambda: []

    @property
    def trivial(self) -> bool:
        """One trained policy and no pool: every row is policy 0 forever."""
        return self.num_policies == 1 and self.pool_size == 0

    def start(self, filled_snapshots: Callable[[], List[int]]) -> None:
        """Draws every group's first seating. `filled_snapshots()` lists the pool's filled
        slots (0..P-1) whenever a seating is drawn."""
        self._filled = filled_snapshots
        self._playing = [self._draw(size) for size in self.sizes]
        for g, seating in enumerate(self._playing):
            self.policy[self.row_group == g] = seating

    def _draw(self, size: int) -> np.ndarray:
        n, rng = self.num_policies, self.rng
        if self.fixed_policy is not None:
            return np.full(size, self.fixed_policy, dtype=np.int64)
        if not self.mix:
            seating = np.full(size, rng.integers(n), dtype=np.int64)
        else:
            seating = rng.integers(n, size=size).astype(np.int64)
        filled = self._filled() if self.pool_size > 0 and size > 1 else []
        if filled:
            learning_seat = rng.integers(size)
            for seat in range(size):
                if seat != learning_seat and rng.random() >= self.latest_prob:
                    seating[seat] = n + filled[rng.integers(len(filled))]
        return seating

    def episode_end(self, row: int, episode_return: float, outcomes: list) -> int:
        """`row` ended its episode (a whole game) with this return: it takes its seat of the
        group's next seating; returns its new policy. A finished game with a trained seat
        against snapshots appends `(policy, WIN|DRAW|LOSS)` to `outcomes`."""
        g, seat = int(self.row_group[row]), int(self.row_seat[row])
        ended = self._ended[g]
        if seat in ended:  # this row ends a second episode before the others ended one: a new round
            self._close_round(g, outcomes)
            ended = self._ended[g]
        if self._next[g] is None:
            self._next[g] = self._draw(self.sizes[g])
        ended[seat] = episode_return
        if len(ended) == self.sizes[g]:
            self._close_round(g, outcomes)
        self.policy[row] = self._seating_for(g)[seat]
        return int(self.policy[row])

    def _seating_for(self, g: int) -> np.ndarray:
        return self._next[g] if self._next[g] is not None else self._playing[g]

    def _close_round(self, g: int, outcomes: list) -> None:
        """Every seat of group g ended the episode it played: score it, start the next one."""
        outcome = game_outcome(self._playing[g], self._ended[g], self.num_policies)
        if outcome is not None:
            outcomes.append(outcome)
        if self._next[g] is not None:
            self._playing[g] = self._next[g]
        self._next[g], self._ended[g] = None, {}


def game_outcome(seating: np.ndarray, returns: dict, num_policies: int):
    """(policy, WIN|DRAW|LOSS) of the game's first trained seat against its best snapshot
    seat, by episode return; None if the game had no snapshot or no trained seat, or a seat's
    return is missing."""
    trained = [s for s in range(len(seating)) if seating[s] < num_policies and s in returns]
    frozen = [s for s in range(len(seating)) if seating[s] >= num_policies and s in returns]
    if not trained or not frozen or len(returns) < len(seating):
        return None
    mine, best = returns[trained[0]], max(returns[s] for s in frozen)
    return int(seating[trained[0]]), (WIN if mine > best else DRAW if mine == best else LOSS)
