"""The PBT rules (learner/pbt_rules.py) against their definitions: perturbation bounds,
mutation odds, the best/worst groups, the two gaps, and the decision for one policy."""

import random
from types import SimpleNamespace

import pytest
import torch

from sf_hydra.learner.pbt_rules import (
    BELOW_ONE,
    HYPERPARAMS,
    decide,
    leads_by_gaps,
    mutated,
    perturbed,
    ranked_groups,
    weights_digest,
)


def pbt(**kw):
    base = dict(replace_fraction=0.3, replace_reward_gap=0.1, replace_reward_gap_absolute=1e-6)
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize("value", [3e-4, 0.5, 7.0])
def test_a_perturbed_value_is_multiplied_or_divided_by_a_factor_in_the_range(value):
    rng = random.Random(0)
    ups = downs = 0
    for _ in range(400):
        new = perturbed("learning_rate", value, rng, 1.1, 1.5)
        factor = new / value
        if factor > 1:
            assert 1.1 - 1e-12 <= factor <= 1.5 + 1e-12
            ups += 1
        else:
            assert 1.1 - 1e-12 <= 1 / factor <= 1.5 + 1e-12
            downs += 1
    assert 150 < ups < 250 and ups + downs == 400  # even odds


@pytest.mark.parametrize("name", sorted(BELOW_ONE))
def test_a_value_below_one_has_its_distance_to_one_perturbed_and_stays_below_one(name):
    rng = random.Random(1)
    for value in (0.9, 0.99, 0.999999):
        for _ in range(200):
            new = perturbed(name, value, rng, 1.1, 1.5)
            assert new < 1.0
            ratio = (1 - new) / (1 - value)
            assert (1.1 - 1e-9 <= ratio <= 1.5 + 1e-9) or (1.1 - 1e-9 <= 1 / ratio <= 1.5 + 1e-9) or new == 1 - 1e-6


def test_mutation_rate_is_the_chance_of_each_hyperparameter():
    hyper = {name: 0.5 for name in HYPERPARAMS}
    rng = random.Random(2)
    assert mutated(hyper, HYPERPARAMS, rng, 0.0, 1.1, 1.5) == hyper
    assert all(v != 0.5 for v in mutated(hyper, HYPERPARAMS, rng, 1.0, 1.1, 1.5).values())
    changed = sum(new != 0.5 for _ in range(500) for new in mutated(hyper, HYPERPARAMS, rng, 0.15, 1.1, 1.5).values())
    assert abs(changed / (500 * len(HYPERPARAMS)) - 0.15) < 0.03
    only = mutated(hyper, ["learning_rate"], rng, 1.0, 1.1, 1.5)
    assert only["learning_rate"] != 0.5 and all(only[n] == 0.5 for n in HYPERPARAMS if n != "learning_rate")


def test_best_and_worst_groups_are_the_rounded_up_fraction():
    objectives = {0: 5.0, 1: 1.0, 2: 3.0, 3: 4.0, 4: 2.0}
    best, worst = ranked_groups(objectives, 0.3)  # ceil(1.5) = 2
    assert best == [0, 3] and worst == [4, 1]
    assert ranked_groups({0: 1.0, 1: 2.0}, 0.3) == ([1], [0])


def test_a_donor_must_lead_by_both_gaps():
    assert leads_by_gaps(100.0, 80.0, relative=0.1, absolute=1.0)
    assert not leads_by_gaps(100.0, 95.0, relative=0.1, absolute=1.0)  # 5% < 10%
    assert not leads_by_gaps(1.0, 0.5, relative=0.1, absolute=3.0)  # 0.5 < 3
    assert leads_by_gaps(-1.0, -5.0, relative=0.5, absolute=1.0)  # relative to |donor|: 4 / 1
    assert not leads_by_gaps(80.0, 100.0, relative=0.0, absolute=0.0)


def test_the_decision_for_best_middle_and_worst_policies():
    objectives = {0: 100.0, 1: 60.0, 2: 10.0, 3: 90.0}
    rules = pbt(replace_fraction=0.25)  # one best (0), one worst (2)
    rng = random.Random(3)
    assert decide(0, objectives, rules, rng).in_best
    middle = decide(1, objectives, rules, rng)
    assert not middle.in_best and middle.donor is None  # mutated, never replaced
    worst = decide(2, objectives, rules, rng)
    assert worst.donor == 0
    assert decide(2, objectives, pbt(replace_fraction=0.25, replace_reward_gap_absolute=95.0), rng).donor is None
    assert decide(2, {2: 1.0}, rules, rng) is None  # nobody to compare with
    assert decide(2, {0: 1.0, 1: 2.0}, rules, rng) is None  # no objective of its own yet


def test_weights_digest_tells_equal_weights_from_different_ones():
    a = torch.nn.Linear(3, 2)
    b = torch.nn.Linear(3, 2)
    assert weights_digest(a.state_dict()) != weights_digest(b.state_dict())
    b.load_state_dict(a.state_dict())
    assert weights_digest(a.state_dict()) == weights_digest(b.state_dict())
    with torch.no_grad():
        b.weight[0, 0] = torch.nextafter(b.weight[0, 0], torch.tensor(1.0))  # one float32 step
    assert weights_digest(a.state_dict()) != weights_digest(b.state_dict())


def test_reward_shaping_weights_are_hyperparameters_and_gamma_only_on_request():
    from sf_hydra.learner.pbt_rules import mutable_names, shaping_difference, shaping_hyperparams

    shaping = {"FRAGCOUNT": (1.0, -1.5), "HEALTH": (0.005, -0.003)}
    hyper = {"learning_rate": 1e-4, "gamma": 0.99, **shaping_hyperparams(shaping)}
    assert hyper["reward_shaping.FRAGCOUNT.down"] == -1.5
    assert mutable_names(pbt(optimize_gamma=False), hyper) == [n for n in hyper if n != "gamma"]
    assert "gamma" in mutable_names(pbt(optimize_gamma=True), hyper)
    assert shaping_difference(hyper, shaping) == [0.0, 0.0, 0.0, 0.0]
    hyper["reward_shaping.FRAGCOUNT.up"], hyper["reward_shaping.HEALTH.down"] = 2.5, -0.001
    # The ups, then the downs: the order of the units an env reports.
    assert shaping_difference(hyper, shaping) == pytest.approx([1.5, 0.0, 0.0, 0.002])
