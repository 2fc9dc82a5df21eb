"""Who beats whom in self-play: a rating of every player and the odds of drawing each snapshot.

From the games the workers report (sf_hydra/core/game_results.py), the league keeps

- a rating of every player, trained policies and snapshots alike, by openskill's Plackett-Luce
  model (Weng & Lin 2011; a Bayesian rating with a mean `mu` and an uncertainty `sigma`; games of
  two or more players, ranked by their returns, ties shared). A snapshot starts from the rating
  of the policy it was taken from when it joins the pool; a trained policy keeps learning, and
  its rating follows it (openskill's `tau` keeps its uncertainty from collapsing);
- each pair's head-to-head record (wins, draws, losses) over the run;
- each trained policy's recent results against each snapshot (the last `window` games), from
  which prioritized fictitious self-play (AlphaStar; Vinyals et al. 2019) sets the odds of
  drawing that snapshot as the policy's opponent (`selfplay.opponent_sampling`):
  `uniform` (1), `hard` ((1 - p)^exponent: the snapshots the policy does not beat yet) or
  `variance` (p (1 - p): the snapshots it beats about half of the time), with p the policy's
  win rate against it, (wins + draws / 2 + 1) / (games + 2) (a uniform prior: 1/2 before any game).

Invariants: every player seen in a game has a rating; a player that held several seats of one
game is ranked by its best seat; the league's state (`state_dict`) is plain JSON.
"""

from __future__ import annotations

from collections import deque
from itertools import combinations
from typing import Deque, Dict, List, Optional, Sequence

from openskill.models import PlackettLuce

from sf_hydra.core.game_results import Game, best_by_player, result, snapshot, trained
from sf_hydra.core.metric_names import DRAW, LOSS, WIN

SCORE = {WIN: 1.0, DRAW: 0.5, LOSS: 0.0}
SAMPLING = ("uniform", "hard", "variance")  # config/choices.py OpponentSampling


def win_rate(scores: Sequence[float]) -> float:
    """The win rate behind `scores` (1 win, 1/2 draw, 0 loss) with a uniform prior: 1/2 with no game."""
    return (sum(scores) + 1.0) / (len(scores) + 2.0)


def priority(p: float, sampling: str, exponent: float) -> float:
    """The weight of an opponent the learner beats with probability `p`, by `sampling` (see above)."""
    if sampling == "hard":
        return (1.0 - p) ** exponent
    if sampling == "variance":
        return p * (1.0 - p)
    if sampling == "uniform":
        return 1.0
    raise ValueError(f"opponent sampling {sampling!r}: one of {SAMPLING}")


class League:
    def __init__(self, num_policies: int, window: int = 100):
        self.num_policies, self.window = num_policies, window
        self.model = PlackettLuce()
        self.ratings: Dict[str, object] = {}  # player name -> its openskill rating
        self.games: Dict[str, int] = {}  # player name -> games rated
        self.record: Dict[str, Dict[str, List[int]]] = {}  # a -> b -> [wins, draws, losses] of a against b
        self.recent: Dict[str, Dict[str, Deque[float]]] = {}  # trained policy -> snapshot -> last scores
        self.retired: Dict[str, dict] = {}  # snapshots that left the pool: their last rating and games
        self.rated = 0  # games rated

    # -- players -------------------------------------------------------------------------------
    def rating(self, name: str):
        if name not in self.ratings:
            self.ratings[name] = self.model.rating(name=name)
            self.games.setdefault(name, 0)
        return self.ratings[name]

    def join(self, generation: int, policy: int) -> str:
        """Snapshot `generation` of trained `policy` joins: it starts from the policy's rating now."""
        name = snapshot(generation)
        source = self.rating(trained(policy))
        self.ratings[name] = self.model.create_rating([source.mu, source.sigma], name=name)
        self.games.setdefault(name, 0)
        return name

    def leave(self, generation: int) -> None:
        """Snapshot `generation` left the pool: its rating is kept as retired, its recent results dropped."""
        name = snapshot(generation)
        if name in self.ratings:
            r = self.ratings.pop(name)
            self.retired[name] = {"mu": r.mu, "sigma": r.sigma, "games": self.games.pop(name, 0)}
        for against in self.recent.values():
            against.pop(name, None)

    # -- games ---------------------------------------------------------------------------------
    def add(self, game: Game) -> None:
        """Rates the game's players by their best return and records every pair's result."""
        best = best_by_player(game, self.num_policies)
        names = list(best)
        if len(names) < 2 or any(n in self.retired for n in names):
            return  # a snapshot that left the pool while the game was reported: not rated again
        teams = [[self.rating(n)] for n in names]
        rated = self.model.rate(teams, scores=[best[n] for n in names])
        for n, team in zip(names, rated):
            self.ratings[n] = team[0]
            self.games[n] = self.games.get(n, 0) + 1
        for a, b in combinations(names, 2):
            self._record(a, b, result(best[a], best[b]))
            self._record(b, a, result(best[b], best[a]))
        self.rated += 1

    def _record(self, a: str, b: str, outcome: str) -> None:
        row = self.record.setdefault(a, {}).setdefault(b, [0, 0, 0])
        row[(WIN, DRAW, LOSS).index(outcome)] += 1
        if a.startswith("policy_") and b.startswith("snapshot_"):
            self.recent.setdefault(a, {}).setdefault(b, deque(maxlen=self.window)).append(SCORE[outcome])

    # -- opponent odds -------------------------------------------------------------------------
    def win_rate(self, policy: int, generation: int) -> float:
        """Trained `policy`'s recent win rate against snapshot `generation` (1/2 before any game)."""
        a, b = trained(policy), snapshot(generation)
        return win_rate(self.recent.get(a, {}).get(b, ()))

    def odds(self, generation: int, sampling: str, exponent: float) -> List[float]:
        """For each trained policy, the weight of drawing snapshot `generation` as its opponent."""
        return [priority(self.win_rate(k, generation), sampling, exponent) for k in range(self.num_policies)]

    # -- reporting -----------------------------------------------------------------------------
    def table(self, pool: Optional[Dict[str, dict]] = None) -> dict:
        """Ratings (best first by their conservative `ordinal`, mu - 3 sigma), head-to-head records
        and retired snapshots; `pool`: extra fields per snapshot name (its policy, env steps)."""
        players = [{"player": n, "mu": r.mu, "sigma": r.sigma, "ordinal": r.ordinal(), "games": self.games.get(n, 0),
                    **(pool or {}).get(n, {})} for n, r in self.ratings.items()]
        players.sort(key=lambda p: -p["ordinal"])
        return {"games_rated": self.rated, "players": players,
                "head_to_head": {a: {b: dict(zip(("wins", "draws", "losses"), row)) for b, row in rows.items()}
                                 for a, rows in self.record.items()},
                "retired": self.retired}

    def scalars(self) -> Dict[str, float]:
        """TensorBoard tags: each trained policy's rating (mu), the pool's best and the games rated."""
        out = {f"selfplay/rating/{n}": r.mu for n, r in self.ratings.items() if n.startswith("policy_")}
        pool = [r.mu for n, r in self.ratings.items() if n.startswith("snapshot_")]
        if pool:
            out["selfplay/rating/pool_best"] = max(pool)
        out["selfplay/games_rated"] = float(self.rated)
        return out

    # -- persistence ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        recent = {a: {b: list(d) for b, d in rows.items()} for a, rows in self.recent.items()}
        return {"ratings": {n: [r.mu, r.sigma] for n, r in self.ratings.items()}, "games": self.games,
                "record": self.record, "recent": recent, "retired": self.retired, "rated": self.rated}

    def load_state_dict(self, state: dict) -> None:
        self.ratings = {n: self.model.create_rating(list(v), name=n) for n, v in state["ratings"].items()}
        self.games = dict(state["games"])
        self.record = {a: {b: list(row) for b, row in rows.items()} for a, rows in state["record"].items()}
        self.recent = {a: {b: deque(d, maxlen=self.window) for b, d in rows.items()}
                       for a, rows in state["recent"].items()}
        self.retired, self.rated = dict(state["retired"]), int(state["rated"])
