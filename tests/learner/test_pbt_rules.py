"""The PBT rules (learner/pbt_rules.py, run by learner/pbt.py) against their definitions:
perturbation bounds, mutation odds, the best/worst groups, the two gaps, the decision for one
policy, and Sample Factory's rules: policy 0 is a reference never perturbed, policies 1..N-1 are
perturbed at the start, a value goes back to its default with 1% chance, gamma and Adam's betas
move by a factor in [1.01, 1.2], Adam's values are tuned only with pbt.optimize_adam; but a member
without an objective is left out of the ranking (Sample Factory waits for every member's)."""

import json
import random
from types import SimpleNamespace

import pytest
import torch

from sf_hydra.config.choices import PBT_HYPERPARAMS as HYPERPARAMS
from sf_hydra.learner.pbt_rules import (
    ADAM,
    BELOW_ONE,
    RESET_TO_DEFAULT,
    decide,
    leads_by_gaps,
    mutable_names,
    mutated,
    perturbed,
    perturbs,
    ranked_groups,
    weights_digest,
)


def pbt(**kw):
    base = dict(replace_fraction=0.3, replace_reward_gap=0.1, replace_reward_gap_absolute=1e-6, optimize_gamma=False,
                optimize_adam=False, mutation_rate=0.15, perturb_min=1.1, perturb_max=1.5, initial_hyperparams={},
                workspace=None, member=-1, start_mutation=0, period_env_steps=1000, target_objective="true_objective")
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
def test_a_value_below_one_has_its_distance_to_one_perturbed_in_1_01_to_1_2_and_stays_below_one(name):
    """Sample Factory's rule for gamma and adam_beta1 (perturb_exponential_decay): the distance to 1
    is multiplied or divided by a factor in [1.01, 1.2], whatever pbt.perturb_min/max say."""
    rng = random.Random(1)
    ratios = []
    for value in (0.9, 0.99, 0.999999):
        for _ in range(300):
            new = perturbed(name, value, rng, 1.1, 1.5)
            assert new < 1.0
            ratio = (1 - new) / (1 - value)
            if new != 1 - 1e-6:
                ratios.append(ratio)
                assert (1.01 - 1e-9 <= ratio <= 1.2 + 1e-9) or (1.01 - 1e-9 <= 1 / ratio <= 1.2 + 1e-9), ratio
    assert min(max(r, 1 / r) for r in ratios) < 1.05  # factors below perturb_min=1.1 are drawn


def test_mutation_rate_is_the_chance_of_each_hyperparameter():
    hyper = {name: 0.5 for name in HYPERPARAMS}
    rng = random.Random(2)
    assert mutated(hyper, HYPERPARAMS, rng, 0.0, 1.1, 1.5) == hyper
    assert all(v != 0.5 for v in mutated(hyper, HYPERPARAMS, rng, 1.0, 1.1, 1.5).values())
    changed = sum(new != 0.5 for _ in range(500) for new in mutated(hyper, HYPERPARAMS, rng, 0.15, 1.1, 1.5).values())
    assert abs(changed / (500 * len(HYPERPARAMS)) - 0.15) < 0.03
    only = mutated(hyper, ["learning_rate"], rng, 1.0, 1.1, 1.5)
    assert only["learning_rate"] != 0.5 and all(only[n] == 0.5 for n in HYPERPARAMS if n != "learning_rate")


def test_a_chosen_value_away_from_its_default_goes_back_to_it_with_one_percent_chance():
    """Sample Factory's _perturb_param: a value chosen for mutation that differs from its default
    is reset to that default with probability 0.01; one at its default is always perturbed."""
    assert RESET_TO_DEFAULT == 0.01
    rng = random.Random(4)
    draws = 40_000
    away = [mutated({"learning_rate": 0.5}, ["learning_rate"], rng, 1.0, 1.1, 1.5, {"learning_rate": 0.1})
            for _ in range(draws)]
    resets = sum(h["learning_rate"] == 0.1 for h in away)
    assert abs(resets / draws - 0.01) < 0.002, resets
    others = [h["learning_rate"] for h in away if h["learning_rate"] != 0.1]
    assert all(1.1 - 1e-9 <= max(v / 0.5, 0.5 / v) <= 1.5 + 1e-9 for v in others)
    at_default = [mutated({"learning_rate": 0.1}, ["learning_rate"], rng, 1.0, 1.1, 1.5, {"learning_rate": 0.1})
                  for _ in range(2000)]
    assert all(h["learning_rate"] != 0.1 for h in at_default)
    # Not chosen (mutation_rate 0): never reset.
    assert mutated({"learning_rate": 0.5}, ["learning_rate"], rng, 0.0, 1.1, 1.5, {"learning_rate": 0.1}) == {
        "learning_rate": 0.5}


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


def test_a_member_without_an_objective_is_left_out_of_the_ranking():
    """Sample Factory's _update_policy returns while any policy's objective window is empty; here such a
    member (no episode since the start or since a replacement) is left out, and only a look at it decides
    nothing."""
    rules = pbt(replace_fraction=0.5)
    rng = random.Random(5)
    worst = decide(2, {0: 100.0, 1: None, 2: 1.0}, rules, rng)  # ranked between 0 and 2: best ceil(0.5 x 2) = 1
    assert worst.donor == 0 and worst.left_out == (1,)
    assert decide(0, {0: 100.0, 1: None, 2: 1.0}, rules, rng).in_best
    assert decide(1, {0: 100.0, 1: None, 2: 1.0}, rules, rng) is None  # no objective of its own
    assert decide(2, {0: None, 1: None, 2: 1.0}, rules, rng) is None  # nobody to rank it against
    full = decide(2, {0: 100.0, 1: 50.0, 2: 1.0}, rules, rng)  # best: ceil(0.5 x 3) = 2
    assert full.donor in (0, 1) and full.left_out == ()


def test_policy_0_is_the_reference_and_never_perturbed():
    assert not perturbs(0)
    assert all(perturbs(k) for k in range(1, 8))


def test_adam_values_are_tuned_only_on_request_and_given_names_are_kept():
    hyper = {name: 0.5 for name in HYPERPARAMS}
    names = mutable_names(pbt(), hyper)
    assert not ADAM & set(names) and "gamma" not in names and "learning_rate" in names
    assert ADAM <= set(mutable_names(pbt(optimize_adam=True), hyper))
    assert "learning_rate" not in mutable_names(pbt(), hyper, keep=("learning_rate",))


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
    from sf_hydra.learner.learner_settings import shaping_difference, shaping_hyperparams
    from sf_hydra.learner.pbt_rules import mutable_names

    shaping = {"FRAGCOUNT": (1.0, -1.5), "HEALTH": (0.005, -0.003)}
    hyper = {"learning_rate": 1e-4, "gamma": 0.99, **shaping_hyperparams(shaping)}
    assert hyper["reward_shaping.FRAGCOUNT.down"] == -1.5
    assert mutable_names(pbt(optimize_gamma=False), hyper) == [n for n in hyper if n != "gamma"]
    assert "gamma" in mutable_names(pbt(optimize_gamma=True), hyper)
    assert shaping_difference(hyper, shaping) == [0.0, 0.0, 0.0, 0.0]
    hyper["reward_shaping.FRAGCOUNT.up"], hyper["reward_shaping.HEALTH.down"] = 2.5, -0.001
    # The ups, then the downs: the order of the units an env reports.
    assert shaping_difference(hyper, shaping) == pytest.approx([1.5, 0.0, 0.0, 0.002])


class FakeLearner:
    """What learner/pbt.py reads of PPOLearner: hyperparameters, objectives (its `statistics`), new
    hyperparameters and copies (its `optimization`; a copy gives the target a new version, as
    PolicyOptimizers.load_policy_state does)."""

    def __init__(self, n, objectives):
        from sf_hydra.config.schema import AlgoConfig

        self.algo = AlgoConfig()
        self.num_policies, self.env_steps = n, 0
        self.statistics = SimpleNamespace(objective=self.objective)
        self.optimization = SimpleNamespace(reward_shaping={}, set_hyperparams=self.set_hyperparams,
                                            copy_policy=self.copy_policy)
        from sf_hydra.learner.learner_settings import initial_hyperparams

        self.hyperparams = [initial_hyperparams(self.algo) for _ in range(n)]
        self.objectives = dict(objectives)
        self.policies = [torch.nn.Linear(2, 2) for _ in range(n)]
        self.policy_versions = [3] * n
        self.stats = [SimpleNamespace(env_steps=0) for _ in range(n)]

    def objective(self, k, name):
        return self.objectives.get(k)

    def set_hyperparams(self, k, hyper):
        self.hyperparams[k] = dict(hyper)

    def copy_policy(self, src, dst):
        self.policies[dst].load_state_dict(self.policies[src].state_dict())
        self.hyperparams[dst] = dict(self.hyperparams[src])
        self.policy_versions[dst] += 1


class FakeDoor:
    def __init__(self):
        self.published = []

    def publish(self, k, model, version):
        self.published.append((k, version, weights_digest(model.state_dict())))

    def publish_replacement(self, k, model, version):
        self.publish(k, model, version)

    def set_reward_shaping(self, k, difference):
        pass


def callback(tmp_path, **kw):
    from sf_hydra.learner.pbt import PopulationBasedTraining

    return PopulationBasedTraining(pbt(**kw), tmp_path, seed=0)


def test_policies_1_to_n_are_perturbed_at_the_start_and_policy_0_never(tmp_path):
    """Sample Factory perturbs policies 1..N-1 when a run starts (values a user named in
    pbt.initial_hyperparams are kept as named); policy 0 starts at the algo.* values."""
    m = FakeLearner(4, {})
    m.hyperparams[2]["learning_rate"] = 1e-7  # as pbt.initial_hyperparams={2:{learning_rate:1e-7}} sets it
    start = [dict(h) for h in m.hyperparams]
    callback(tmp_path, mutation_rate=1.0, initial_hyperparams={2: {"learning_rate": 1e-7}}).on_train_start(None, m)
    assert m.hyperparams[0] == start[0]
    tuned = mutable_names(pbt(), start[1])
    for k in (1, 2, 3):
        changed = {n for n in start[k] if m.hyperparams[k][n] != start[k][n]}
        assert changed == set(tuned) - ({"learning_rate"} if k == 2 else set()), (k, changed)
    assert m.hyperparams[2]["learning_rate"] == 1e-7
    # A resumed run (its history files exist) is not perturbed again.
    again = [dict(h) for h in m.hyperparams]
    callback(tmp_path, mutation_rate=1.0).on_train_start(None, m)
    assert m.hyperparams == again


def test_the_reference_is_never_mutated_at_a_look_but_may_take_a_donor_as_it_is(tmp_path):
    trainer = SimpleNamespace(datamodule=SimpleNamespace(door=FakeDoor()))
    m = FakeLearner(2, {0: 10.0, 1: 11.0})  # 0 is the worst, but within the gaps: kept
    cb = callback(tmp_path, mutation_rate=1.0, replace_fraction=0.5, replace_reward_gap=0.5)
    cb.on_train_start(None, m)
    before = dict(m.hyperparams[0])
    cb._look_at(trainer, m, 0, 1000)
    assert m.hyperparams[0] == before and m.policy_versions[0] == 3
    m.objectives = {0: 1.0, 1: 100.0}  # now far behind: replaced by policy 1, hyperparameters unperturbed
    cb._look_at(trainer, m, 0, 2000)
    assert m.hyperparams[0] == m.hyperparams[1]
    digest = weights_digest(m.policies[1].state_dict())
    assert trainer.datamodule.door.published == [(0, 4, digest)]  # a new version, published at once
    m.objectives = {0: 1.0, 1: 100.0}
    cb._look_at(trainer, m, 1, 3000)  # policy 1 in the best: kept
    m.objectives = {0: 100.0, 1: 1.0}
    cb._look_at(trainer, m, 1, 4000)  # policy 1 replaced by 0, then perturbed
    assert m.hyperparams[1] != m.hyperparams[0]
    actions = [json.loads(line)["action"] for line in (tmp_path / "pbt" / "events.jsonl").read_text().splitlines()]
    assert actions == ["kept (reference)", "replaced", "kept (best)", "replaced"]


def test_the_true_objective_is_the_unshaped_return_unless_the_env_reports_its_own():
    """Sample Factory ranks by `true_objective`: the env's own statistic of that name when it
    reports one, else the raw return; never what a policy's own (mutated) shaping weights paid."""
    from sf_hydra.core.metric_names import TRUE_OBJECTIVE, metric_value
    from sf_hydra.learner.statistics import PolicyStats

    stats = PolicyStats(10)
    assert stats.true_objective() is None
    stats.episode_returns.extend([30.0, 60.0])  # shaped: what the policy was paid
    stats.true_returns.extend([10.0, 20.0])
    assert stats.avg_return() == 45.0 and stats.true_objective() == 15.0
    assert metric_value(stats, TRUE_OBJECTIVE) == 15.0 and metric_value(stats, "reward") == 45.0
    stats.add_extra({TRUE_OBJECTIVE: 7.0})
    assert stats.true_objective() == 7.0
    restored = PolicyStats(10)
    restored.restore(stats.state())
    assert restored.true_objective() == 7.0 and list(restored.true_returns) == [10.0, 20.0]


def test_an_episode_reports_its_return_without_the_shaping_bonus():
    import numpy as np

    from sf_hydra.sampler.episode_tracker import EpisodeTracker

    games, episodes = EpisodeTracker(2), []
    games.add(slice(0, 2), np.array([1.0, 3.0]), 1)  # no bonus yet
    games.add(slice(0, 2), np.array([1.0, 3.0]), 1, np.array([0.0, 2.0]))  # row 1's policy adds 2
    games.add(slice(0, 2), np.array([1.0, 3.0]), 1, np.array([0.0, 2.0]))
    games.end(0, False, episodes, 0)
    games.end(1, False, episodes, 1)
    assert [(e.ret, e.true_ret) for e in episodes] == [(3.0, 3.0), (9.0, 5.0)]
    assert EpisodeTracker(1).end(0, False, [], 0).true_ret is None  # never shaped: the return is the true one
