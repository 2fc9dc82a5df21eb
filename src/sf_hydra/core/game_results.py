"""A finished multi-agent game as the sampler reports it to the learner: who sat in each seat and
what each seat scored. The sampler writes them (sampler/policy_mapping.py), the learner derives
the self-play outcomes of its trained policies from them and rates every player
(learner/league.py).

Players: a seat's `policy` is a trained policy's id (0..N-1) or an opponent-pool slot's
(N + slot); a snapshot is named by its `generation` (> 0, unique in a run; the pool slot is
only where it sat), a trained policy by its id (its generation is 0).

Invariants: a leaf module (imports nothing of sf_hydra), so the learner and the sampler both
read it; a Game has one entry per seat in each of its three tuples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from sf_hydra.core.metric_names import DRAW, LOSS, WIN


@dataclass(frozen=True)
class Game:
    policies: Tuple[int, ...]  # per seat: the policy id that acted (N + slot for a snapshot)
    generations: Tuple[int, ...]  # per seat: the snapshot's generation, 0 for a trained policy
    returns: Tuple[float, ...]  # per seat: its episode return (the whole game)


def trained(policy: int) -> str:
    """Trained policy `policy`'s player name."""
    return f"policy_{policy}"


def snapshot(generation: int) -> str:
    """Snapshot `generation`'s player name (the same as its file's stem in the run's selfplay/ folder)."""
    return f"snapshot_{generation:06d}"


def player(policy: int, generation: int, num_policies: int) -> str:
    """A seat's player name: `trained(policy)` for a trained policy, `snapshot(generation)` for a snapshot."""
    return trained(policy) if policy < num_policies else snapshot(generation)


def players(game: Game, num_policies: int) -> Tuple[str, ...]:
    """Each seat's player name (see `player`)."""
    return tuple(player(p, g, num_policies) for p, g in zip(game.policies, game.generations))


def best_by_player(game: Game, num_policies: int) -> Dict[str, float]:
    """Each distinct player's best return in the game: a player that held several seats is ranked
    by its best seat (its other seats are left out of the rating)."""
    best: Dict[str, float] = {}
    for name, ret in zip(players(game, num_policies), game.returns):
        best[name] = max(best.get(name, -float("inf")), ret)
    return best


def result(mine: float, theirs: float) -> str:
    """WIN, DRAW or LOSS of a return against another's."""
    return WIN if mine > theirs else DRAW if mine == theirs else LOSS


def pool_outcome(game: Game, num_policies: int) -> Optional[Tuple[int, str]]:
    """(policy, WIN|DRAW|LOSS) of the game's first trained seat against its best snapshot seat, by
    episode return; None if the game had no snapshot or no trained seat."""
    trained = [s for s, p in enumerate(game.policies) if p < num_policies]
    frozen = [s for s, p in enumerate(game.policies) if p >= num_policies]
    if not trained or not frozen:
        return None
    first = trained[0]
    return game.policies[first], result(game.returns[first], max(game.returns[s] for s in frozen))
