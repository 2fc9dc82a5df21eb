"""The exact divergences (models/kl.py), the KL penalty and the symmetric-KL exploration loss
(learner/losses.py), and the action distributions' recorded parameters they read
(models/action_heads.py), from the definitions."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch.distributions import Categorical, Normal, kl_divergence

from sf_hydra.config.schema import ModelConfig
from sf_hydra.learner.losses import SYMMETRIC_KL_CAP, kl_penalty_loss, symmetric_kl_exploration_loss
from sf_hydra.models.action_heads import make_action_head
from sf_hydra.models.kl import categorical_kl, gaussian_kl, symmetric_kl_with_uniform


def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_categorical_kl_matches_the_sum_definition():
    rng = np.random.default_rng(0)
    p, q = rng.normal(size=(7, 5)) * 3, rng.normal(size=(7, 5)) * 3
    lp, lq = np_log_softmax(p), np_log_softmax(q)
    ref = (np.exp(lp) * (lp - lq)).sum(-1)
    np.testing.assert_allclose(categorical_kl(torch.tensor(p), torch.tensor(q)).numpy(), ref, rtol=1e-10)
    # logits are unnormalized: a constant shift changes nothing; KL(p || p) = 0
    torch.testing.assert_close(categorical_kl(torch.tensor(p) + 5.0, torch.tensor(q)), torch.tensor(ref))
    assert torch.allclose(categorical_kl(torch.tensor(p), torch.tensor(p)), torch.zeros(7, dtype=torch.float64))


def test_categorical_kl_hand_worked():
    """p = (3/4, 1/4), q = (1/2, 1/2): KL = 3/4 ln(3/2) + 1/4 ln(1/2)."""
    p = torch.log(torch.tensor([0.75, 0.25]))
    q = torch.zeros(2)
    assert categorical_kl(p, q).item() == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5), rel=1e-6)


def test_gaussian_kl_matches_the_closed_form_and_torch():
    rng = np.random.default_rng(1)
    pm, qm = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    ps, qs = np.exp(rng.normal(size=(6, 3)) * 0.5), np.exp(rng.normal(size=(6, 3)) * 0.5)
    ref = (np.log(qs / ps) + (ps**2 + (pm - qm) ** 2) / (2 * qs**2) - 0.5).sum(-1)
    got = gaussian_kl(*(torch.tensor(a) for a in (pm, ps, qm, qs)))
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10)
    theirs = kl_divergence(Normal(torch.tensor(pm), torch.tensor(ps)), Normal(torch.tensor(qm), torch.tensor(qs)))
    np.testing.assert_allclose(got.numpy(), theirs.sum(-1).numpy(), rtol=1e-10)


def test_symmetric_kl_with_uniform_hand_worked():
    """p = (3/4, 1/4), u = (1/2, 1/2): KL(p||u) = 3/4 ln(3/2) + 1/4 ln(1/2),
    KL(u||p) = 1/2 ln(2/3) + 1/2 ln 2; the loss is their mean. Uniform logits give 0."""
    p = torch.log(torch.tensor([[0.75, 0.25]]))
    kl_pu = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    kl_up = 0.5 * math.log(2 / 3) + 0.5 * math.log(2)
    assert symmetric_kl_with_uniform(p).item() == pytest.approx(0.5 * (kl_pu + kl_up), rel=1e-6)
    assert symmetric_kl_with_uniform(torch.full((1, 4), 3.0)).item() == pytest.approx(0.0, abs=1e-7)


def test_symmetric_kl_grows_without_bound_where_entropy_does_not():
    """As one action's probability goes to 0, the entropy barely moves but the symmetric KL to a
    uniform prior blows up (Sample Factory's reason for it); the exploration loss caps it."""
    near_zero = [torch.tensor([[0.0, 0.0, -k]]) for k in (10.0, 20.0, 40.0)]
    entropies = [Categorical(logits=lg).entropy().item() for lg in near_zero]
    sym = [symmetric_kl_with_uniform(lg).item() for lg in near_zero]
    assert max(entropies) - min(entropies) < 1e-3
    assert sym[0] < sym[1] < sym[2] and sym[2] > 4.0
    huge = torch.tensor([[0.0, -200.0]])
    assert symmetric_kl_exploration_loss(symmetric_kl_with_uniform(huge)).item() == SYMMETRIC_KL_CAP


def test_penalties_average_over_valid_transitions_only():
    kl = torch.tensor([[1.0, 3.0], [100.0, 5.0]])
    valid = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    assert kl_penalty_loss(kl, valid).item() == pytest.approx(3.0)
    assert kl_penalty_loss(kl).item() == pytest.approx(27.25)
    assert symmetric_kl_exploration_loss(kl, valid).item() == pytest.approx(3.0)


# -- the distributions' recorded parameters ------------------------------------------------------


def _head(space, **model):
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), model)
    torch.manual_seed(0)
    return make_action_head(8, space, cfg)


def test_multi_categorical_params_rebuild_its_kl():
    head = _head(gym.spaces.MultiDiscrete([3, 2, 4]))
    x = torch.randn(5, 8)
    new, old = head.distribution(x), head.distribution(x + 0.5 * torch.randn(5, 8))
    params = old.params()
    assert params.shape == (5, head.params_size) == (5, 9)
    expected = sum(kl_divergence(n, o) for o, n in zip(old.dists, new.dists))  # KL(new || old) per categorical
    torch.testing.assert_close(new.kl_to(params), expected)
    torch.testing.assert_close(new.kl_to(new.params()), torch.zeros(5), atol=1e-6, rtol=0)
    sym = sum(symmetric_kl_with_uniform(lg) for lg in new.logits)
    torch.testing.assert_close(new.symmetric_kl_with_uniform_prior(), sym)


def test_single_categorical_params_are_its_logits():
    head = _head(gym.spaces.Discrete(4))
    x = torch.randn(3, 8)
    torch.testing.assert_close(head.distribution(x).params(), head.linear(x))


@pytest.mark.parametrize("model", [{}, {"adaptive_stddev": False}, {"continuous_tanh_scale": 2.0}],
                         ids=["adaptive", "vector_std", "tanh_means"])
def test_gaussian_params_rebuild_its_kl(model):
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    head = _head(space, **model)
    x = torch.randn(6, 8)
    new, old = head.distribution(x), head.distribution(x + 0.3 * torch.randn(6, 8))
    params = old.params()
    assert params.shape == (6, head.params_size) == (6, 6)
    expected = kl_divergence(new.normal, old.normal).sum(-1)
    torch.testing.assert_close(new.kl_to(params), expected)


def test_squashed_gaussian_kl_is_the_kl_of_the_actions():
    """The squash is the same invertible map for both policies, so the KL of the Gaussians is the
    KL of the actions: a Monte-Carlo estimate E_new[log p_new(a) - log p_old(a)] over squashed
    samples agrees."""
    space = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
    head = _head(space, tanh_squash_actions=True)
    x = torch.randn(1, 8).double().expand(200_000, 8)
    head = head.double()
    new, old = head.distribution(x), head.distribution(x + 0.4)
    exact = new.kl_to(old.params())[0].item()
    torch.manual_seed(1)
    a = new.sample()
    estimate = (new.log_prob(a) - old.log_prob(a)).mean().item()
    assert exact > 0.01
    assert estimate == pytest.approx(exact, rel=0.1, abs=0.005)
