"""The acting path: Gumbel-max draws (MultiCategorical.act) and several policies acting in one
fused forward (FusedPolicies), checked against their definitions."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.core.spaces import ACTION_MASK
from sf_hydra.models import build_model, model_recipe
from sf_hydra.models.action_heads import CategoricalHead, MultiCategorical, gumbel_argmax
from sf_hydra.models.actor_critic import FusedPolicies, act_per_policy, policies_act
from sf_hydra.sampler.policy_store import PolicyStore
from tests.conftest import make_cfg


def chi_square_p(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson's chi-square test's p-value. The chi-square distribution's survival function with k degrees
    of freedom is the regularized upper incomplete gamma Q(k/2, stat/2) (= scipy.stats.chi2.sf, to the last
    digit): torch's, since scipy comes with no extra of README's install line (only `optuna` brings it)."""
    expected = probs * counts.sum()
    stat = float(((counts - expected) ** 2 / expected).sum())
    dof = torch.tensor((len(probs) - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(dof, torch.tensor(stat / 2, dtype=torch.float64)))


def test_gumbel_draws_follow_the_softmax_probabilities():
    torch.manual_seed(1)
    logits = torch.tensor([2.0, 0.5, -1.0, 0.0, 1.0])
    n = 200_000
    draws = gumbel_argmax(torch.log_softmax(logits, -1).expand(n, 5))[:, 0]
    counts = np.bincount(draws.numpy(), minlength=5)
    p = chi_square_p(counts, torch.softmax(logits, -1).double().numpy())
    assert p > 1e-3, (counts, p)
    # Raw logits draw the same: a row's shift changes no argmax.
    torch.manual_seed(1)
    assert torch.equal(gumbel_argmax((logits + 3.0).expand(n, 5))[:, 0], draws)


def test_acting_draws_follow_the_distribution_and_return_its_log_probs():
    torch.manual_seed(2)
    logits = torch.tensor([[0.3, -0.2, 1.5], [-2.0, 0.0, 0.1]])
    n = 50_000
    dist = MultiCategorical([logits.repeat(n, 1)], single=True)
    actions, log_probs = dist.act()
    logp = torch.log_softmax(logits, -1).repeat(n, 1)
    assert torch.equal(log_probs, logp.gather(1, actions[:, None])[:, 0])
    for row in range(2):
        counts = np.bincount(actions[row::2].numpy(), minlength=3)
        assert chi_square_p(counts, torch.softmax(logits[row], -1).double().numpy()) > 1e-3
    greedy, greedy_lp = dist.act(deterministic=True)
    assert torch.equal(greedy, logits.argmax(-1).repeat(n))
    assert torch.equal(greedy_lp, logp.max(-1).values)


def test_multi_discrete_acting_draws_each_part_and_sums_log_probs():
    torch.manual_seed(3)
    head = CategoricalHead(6, [3, 2], single=False)
    x = torch.randn(4, 6)
    dist = head.distribution(x)
    actions, log_probs = dist.act()
    assert actions.shape == (4, 2) and actions[:, 0].max() < 3 and actions[:, 1].max() < 2
    assert torch.allclose(log_probs, dist.log_prob(actions))


def test_a_forbidden_action_is_never_drawn():
    torch.manual_seed(4)
    head = CategoricalHead(8, [5], single=True)
    with torch.no_grad():  # the allowed action is far less likely than the forbidden ones would be
        head.linear.bias.copy_(torch.tensor([-60.0, 30.0, 30.0, -60.0, 30.0]))
    rows = 100_000
    mask = torch.tensor([[1, 0, 0, 1, 0], [1, 0, 0, 0, 0]], dtype=torch.int8).repeat(rows // 2, 1)
    actions, log_probs = head.distribution(torch.zeros(rows, 8), mask).act()
    assert torch.all(mask.gather(1, actions[:, None]) == 1)
    assert torch.isfinite(log_probs).all()
    assert set(actions[0::2].tolist()) == {0, 3} and set(actions[1::2].tolist()) == {0}


# ---- several policies in one forward -------------------------------------------------------------------------

def cartpole_models(tmp_path, n: int, *overrides: str):
    cfg = make_cfg(tmp_path, "env=gym/cartpole", *overrides)
    obs_space = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
    models = []
    for p in range(n):
        torch.manual_seed(10 + p)
        models.append(build_model(model_recipe(cfg), obs_space, gym.spaces.Discrete(2)).eval())
    return models


def reference(models, obs, policies, seed: int, deterministic: bool = False):
    """Row i as models[policies[i]].act of all the rows, each model from the same random state."""
    outs = []
    for m in models:
        torch.manual_seed(seed)
        outs.append(m.act(obs, None, deterministic))
    pick = torch.from_numpy(policies)
    rows = torch.arange(len(policies))

    def sel(get):
        return torch.stack([get(o) for o in outs])[pick, rows]
    return outs, sel


def assert_matches(fused_out, sel):
    assert torch.equal(fused_out.actions, sel(lambda o: o.actions))
    assert torch.allclose(fused_out.log_probs, sel(lambda o: o.log_probs), atol=1e-6)
    assert torch.allclose(fused_out.values, sel(lambda o: o.values), atol=1e-5)


@pytest.mark.parametrize("deterministic", [False, True])
def test_fused_policies_act_as_each_rows_own_policy(tmp_path, deterministic):
    models = cartpole_models(tmp_path, 3, "algo.kl_loss_coeff=0.1")
    originals = copy.deepcopy(models)
    assert FusedPolicies.supports(models)
    fused = FusedPolicies(models)
    obs = {"obs": torch.randn(32, 4)}
    policies = np.random.default_rng(0).integers(0, 3, 32)
    torch.manual_seed(5)
    got = fused.act(obs, None, policies, deterministic)
    _, sel = reference(originals, obs, policies, 5, deterministic)
    assert_matches(got, sel)
    assert torch.allclose(got.extras["action_dist_params"], sel(lambda o: o.extras["action_dist_params"]),
                          atol=1e-5)
    # The per-policy split gives the same values and log-probs of its own actions.
    split = act_per_policy(originals, obs, None, policies)
    assert torch.allclose(split.values, got.values, atol=1e-5)


def test_fused_policies_follow_new_weights_loaded_in_place(tmp_path):
    models = cartpole_models(tmp_path, 2)
    act = policies_act(models)
    newer = cartpole_models(tmp_path / "b", 3)[2]  # other weights
    store = PolicyStore(newer)
    store.publish(newer, 7)
    assert store.load_into(models[1]) == 7
    obs = {"obs": torch.randn(16, 4)}
    policies = np.arange(16) % 2
    torch.manual_seed(6)
    got = act(obs, None, policies)
    _, sel = reference([models[0], newer], obs, policies, 6)
    assert_matches(got, sel)


def test_fused_policies_keep_forbidden_actions_out(tmp_path):
    cfg = make_cfg(tmp_path, "env=gym/cartpole")
    space = gym.spaces.Dict({"obs": gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
                             ACTION_MASK: gym.spaces.Box(0, 1, (3,), np.int8)})
    models = []
    for p in range(2):
        torch.manual_seed(p)
        models.append(build_model(model_recipe(cfg), space, gym.spaces.Discrete(3)).eval())
    originals = copy.deepcopy(models)
    fused = FusedPolicies(models)
    rows = 4000
    mask = torch.tensor([[1, 0, 1], [0, 1, 0]], dtype=torch.int8).repeat(rows // 2, 1)
    obs = {"obs": torch.randn(rows, 4), ACTION_MASK: mask}
    policies = np.arange(rows) % 2
    torch.manual_seed(7)
    got = fused.act(obs, None, policies)
    assert torch.all(mask.gather(1, got.actions[:, None]) == 1)
    _, sel = reference(originals, obs, policies, 7)
    assert_matches(got, sel)


def test_models_that_cannot_fuse_act_per_policy(tmp_path):
    assert not FusedPolicies.supports(cartpole_models(tmp_path, 2, "model.use_rnn=true"))
    assert not FusedPolicies.supports(cartpole_models(tmp_path, 2, "algo.normalize_input=true"))
    assert FusedPolicies.supports(cartpole_models(tmp_path, 1))
    assert not FusedPolicies.supports(cartpole_models(tmp_path, FusedPolicies.MAX_POLICIES + 1))
    models = cartpole_models(tmp_path, 2, "model.use_rnn=true")
    obs, rnn = {"obs": torch.randn(8, 4)}, torch.zeros(8, models[0].rnn_state_size)
    policies = np.arange(8) % 2
    torch.manual_seed(8)
    got = policies_act(models)(obs, rnn, policies)
    torch.manual_seed(8)
    want = act_per_policy(models, obs, rnn, policies)
    assert torch.equal(got.actions, want.actions) and torch.equal(got.rnn_states, want.rnn_states)


def test_one_policy_acts_bit_for_bit_as_its_model(tmp_path):
    models = cartpole_models(tmp_path, 2, "algo.kl_loss_coeff=0.1")
    originals = copy.deepcopy(models)
    fused = FusedPolicies(models)
    obs = {"obs": torch.randn(16, 4)}
    for policies, p in ((None, 0), (np.ones(16, dtype=np.int64), 1)):
        for deterministic in (False, True):
            torch.manual_seed(9)
            got = fused.act(obs, None, policies, deterministic)
            torch.manual_seed(9)
            want = originals[p].act(obs, None, deterministic)
            for name in ("actions", "log_probs", "values"):
                assert torch.equal(getattr(got, name), getattr(want, name)), name
            assert torch.equal(got.extras["action_dist_params"], want.extras["action_dist_params"])
