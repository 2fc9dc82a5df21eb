"""The rules of population-based training (learner/pbt.py runs them): pure functions of
the population's objectives, hyperparameters and a random generator.

They are Sample Factory's (its pbt/population_based_training.py), each with its test in
tests/learner/test_pbt_rules.py:
  - a member is ranked only once it has an objective (`decide`). Sample Factory waits until every member has
    one; here a member without one (no episode since the start, or since a replacement emptied its windows) is
    left out of the ranking and a look at it is skipped, so that one replacement does not make every member's
    looks pass without a decision until the replaced one finishes an episode;
  - member 0 is the reference: never perturbed, at the start or later; it may still be replaced,
    and then takes the donor's hyperparameters as they are (`perturbs`);
  - members 1..N-1 are perturbed once at the start (learner/pbt.py), as at each look;
  - a perturbed value that differs from its default (the run's algo.* value, or the env's declared
    shaping weight) goes back to that default with probability RESET_TO_DEFAULT (`mutated`);
  - gamma and Adam's betas have their distance to 1 perturbed by a factor in BELOW_ONE_RANGE,
    whatever pbt.perturb_min/max say (those are for the other values) (`perturbed`);
  - SF tunes none of Adam's values: they are perturbed only with pbt.optimize_adam (ours), as gamma
    only with pbt.optimize_gamma (`mutable_names`).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

BELOW_ONE = frozenset({"adam_beta1", "adam_beta2", "gamma"})  # perturbed through 1 - value
BELOW_ONE_RANGE = (1.01, 1.2)  # their factors (Sample Factory's, for gamma and adam_beta1): they move slowly
MIN_BELOW_ONE = 1e-6  # the least distance to 1 a BELOW_ONE value keeps
ADAM = frozenset({"adam_beta1", "adam_beta2", "adam_eps"})  # tuned only with pbt.optimize_adam
RESET_TO_DEFAULT = 0.01  # chance that a value chosen for perturbation goes back to its default instead
REFERENCE = 0  # the member never perturbed


def perturbed(name: str, value: float, rng: random.Random, low: float, high: float) -> float:
    """`value` multiplied or divided (even odds) by a factor drawn from [low, high]; for a
    BELOW_ONE name the distance to 1 is what is multiplied or divided, by a factor drawn from
    BELOW_ONE_RANGE instead (so the value stays in [0, 1 - MIN_BELOW_ONE])."""
    if name in BELOW_ONE:
        low, high = BELOW_ONE_RANGE
    factor = rng.uniform(low, high)
    if rng.random() < 0.5:
        factor = 1.0 / factor
    if name in BELOW_ONE:
        return 1.0 - max(MIN_BELOW_ONE, min(1.0, (1.0 - value) * factor))
    return value * factor


def mutated(hyper: Dict[str, float], names: Sequence[str], rng: random.Random, rate: float, low: float,
            high: float, defaults: Optional[Dict[str, float]] = None) -> Dict[str, float]:
    """A copy of `hyper` where each of `names` is chosen with probability `rate`; a chosen value
    that differs from its entry in `defaults` goes back to it with probability RESET_TO_DEFAULT,
    else (and always without a default) it is `perturbed`. Names not in `names` are unchanged."""
    out = dict(hyper)
    defaults = defaults or {}
    for name in names:
        if rng.random() >= rate:
            continue
        default = defaults.get(name)
        if default is not None and hyper[name] != default and rng.random() < RESET_TO_DEFAULT:
            out[name] = float(default)
        else:
            out[name] = perturbed(name, hyper[name], rng, low, high)
    return out


def perturbs(member: int) -> bool:
    """Whether PBT perturbs this member's hyperparameters (at the start and at its looks): all
    but the reference, member 0, which keeps its own (or, replaced, its donor's) unperturbed."""
    return member != REFERENCE


def ranked_groups(objectives: Dict[int, float], fraction: float):
    """(best, worst): the ceil(fraction * N) members with the highest and the lowest objective."""
    order = sorted(objectives, key=lambda k: objectives[k], reverse=True)
    n = min(len(order), math.ceil(fraction * len(order)))
    return order[:n], order[len(order) - n:]


def leads_by_gaps(donor: float, target: float, relative: float, absolute: float) -> bool:
    """The donor's objective beats the target's by more than both gaps (the relative one
    measured against the donor's objective)."""
    delta = donor - target
    return delta > absolute and delta / (abs(donor) + 1e-8) > relative


class Decision(NamedTuple):
    """What one look at a policy decided: its donor (None: it keeps its weights), whether it
    was in the best group (then nothing changes), the objectives seen (None: that member has
    none) and the members left out of the ranking for want of one."""

    policy: int
    donor: Optional[int]
    in_best: bool
    objectives: Dict[int, Optional[float]]
    left_out: Tuple[int, ...] = ()


def unranked(objectives: Dict[int, Optional[float]]) -> Tuple[int, ...]:
    """The members without an objective (None: no episode yet), in order: the ranking leaves them out."""
    return tuple(sorted(k for k, o in objectives.items() if o is None))


def decide(policy: int, objectives: Dict[int, Optional[float]], pbt, rng: random.Random) -> Optional[Decision]:
    """The PBT rule for `policy` given each member's objective (None: no episode yet), ranked among the
    members that have one (the others are `Decision.left_out`). None (no decision: nothing changes) when
    `policy` has no objective or no other member has one."""
    ranked = {k: o for k, o in objectives.items() if o is not None}
    if policy not in ranked or len(ranked) < 2:
        return None
    left_out = unranked(objectives)
    best, worst = ranked_groups(ranked, pbt.replace_fraction)
    if policy in best:
        return Decision(policy, None, True, objectives, left_out)
    donor = None
    if policy in worst:
        candidate = rng.choice(best)
        if leads_by_gaps(ranked[candidate], ranked[policy], pbt.replace_reward_gap,
                         pbt.replace_reward_gap_absolute):
            donor = candidate
    return Decision(policy, donor, False, objectives, left_out)


def mutable_names(pbt, hyper: Dict[str, float], keep: Sequence[str] = ()) -> List[str]:
    """What PBT perturbs of a policy's hyperparameters: all (reward shaping included) but gamma,
    unless pbt.optimize_gamma, Adam's (ADAM), unless pbt.optimize_adam, and the names in `keep`."""
    return [n for n in hyper if (n != "gamma" or pbt.optimize_gamma) and (n not in ADAM or pbt.optimize_adam)
            and n not in keep]


def weights_digest(state_dict) -> str:
    """SHA-256 of a state dict's tensors (names and bytes, in order): equal digests, equal weights."""
    h = hashlib.sha256()
    for name, tensor in state_dict.items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def append_jsonl(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
