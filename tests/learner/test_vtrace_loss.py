"""V-trace (learner/vtrace.py) against the IMPALA paper's definition, read forwards as a sum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sf_hydra.learner.advantages import gae
from sf_hydra.learner.vtrace import vtrace


def vtrace_reference(log_rhos, rewards, values, dones, gamma, rho_bar, c_bar):
    """v_s = V(x_s) + sum_{t=s}^{T-1} gamma^(t-s) (prod_{i=s}^{t-1} c_i) delta_t, delta_t =
    rho_t (r_t + gamma V(x_{t+1}) - V(x_t)), the sum stopping after the step that ends the episode
    (no gamma V(x_{t+1}) there either); advantage_s = rho_s (r_s + gamma v_{s+1} - V(x_s)), v_T = V(x_T)."""
    n, steps = rewards.shape
    ratios = np.exp(log_rhos)
    rho, c = np.minimum(rho_bar, ratios), np.minimum(c_bar, ratios)
    vs = np.zeros((n, steps))
    adv = np.zeros((n, steps))
    for b in range(n):
        for s in range(steps):
            total, weight = values[b, s], 1.0
            for t in range(s, steps):
                next_value = 0.0 if dones[b, t] else values[b, t + 1]
                total += weight * rho[b, t] * (rewards[b, t] + gamma * next_value - values[b, t])
                if dones[b, t]:
                    break
                weight *= gamma * c[b, t]
            vs[b, s] = total
        for s in range(steps):
            next_vs = values[b, steps] if s == steps - 1 else vs[b, s + 1]
            next_vs = 0.0 if dones[b, s] else next_vs
            adv[b, s] = rho[b, s] * (rewards[b, s] + gamma * next_vs - values[b, s])
    return vs, adv


def _case(seed, n=5, steps=8, spread=1.0):
    rng = np.random.default_rng(seed)
    log_rhos = spread * rng.normal(size=(n, steps))
    rewards = rng.normal(size=(n, steps))
    values = rng.normal(size=(n, steps + 1))
    dones = (rng.random((n, steps)) < 0.2).astype(np.float64)
    dones[0] = 0.0  # bootstraps from V(x_T)
    dones[1, -1] = 1.0  # ends exactly at the rollout's end
    return log_rhos, rewards, values, dones


def _torch(*arrays):
    return [torch.as_tensor(a, dtype=torch.float64) for a in arrays]


@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (1.0, 0.5), (2.0, 1.0), (0.7, 0.3)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vtrace_matches_the_definition(seed, rho_bar, c_bar):
    log_rhos, rewards, values, dones = _case(seed)
    vs, adv = vtrace(*_torch(log_rhos, rewards, values, dones), 0.97, rho_bar, c_bar)
    ref_vs, ref_adv = vtrace_reference(log_rhos, rewards, values, dones, 0.97, rho_bar, c_bar)
    np.testing.assert_allclose(vs.numpy(), ref_vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(adv.numpy(), ref_adv, rtol=1e-10, atol=1e-10)


def test_on_policy_vtrace_is_the_bootstrapped_n_step_return():
    """pi = mu, rho_bar = c_bar = 1: v_s is GAE's target with lambda = 1, and v_s - V(x_s) its
    advantage; the policy-gradient advantage is the one-step look-ahead r_s + gamma v_{s+1} - V(x_s)."""
    _, rewards, values, dones = _case(3)
    r, v, d = _torch(rewards, values, dones)
    vs, adv = vtrace(torch.zeros_like(r), r, v, d, 0.9, 1.0, 1.0)
    gae_adv, gae_returns = gae(r, v, d, 0.9, 1.0)
    torch.testing.assert_close(vs, gae_returns)
    next_vs = torch.cat([vs[:, 1:], v[:, -1:]], dim=1) * (1.0 - d)
    torch.testing.assert_close(adv, r + 0.9 * next_vs - v[:, :-1])


def test_hand_worked_two_steps():
    """One row, two steps, no episode end, gamma = 0.5, rho_bar = 1, c_bar = 0.5.
    ratios: 2 (-> rho 1, c 0.5) then 0.25 (rho 0.25, c 0.25). V = [1, 2, 4], r = [1, 0].
    delta_1 = 0.25 (0 + 0.5*4 - 2) = 0;  v_1 = 2 + 0 = 2
    delta_0 = 1 (1 + 0.5*2 - 1) = 1;     v_0 = 1 + 1 + 0.5*0.5 (v_1 - V_1) = 2
    adv_0 = 1 (1 + 0.5*2 - 1) = 1;  adv_1 = 0.25 (0 + 0.5*4 - 2) = 0."""
    log_rhos = torch.log(torch.tensor([[2.0, 0.25]]))
    vs, adv = vtrace(log_rhos, torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 2.0, 4.0]]), torch.zeros(1, 2),
                     0.5, 1.0, 0.5)
    torch.testing.assert_close(vs, torch.tensor([[2.0, 2.0]]))
    torch.testing.assert_close(adv, torch.tensor([[1.0, 0.0]]))


def test_truncation_bounds_the_correction():
    """A huge importance ratio counts as rho_bar: the targets equal those for a ratio of rho_bar."""
    log_rhos, rewards, values, dones = _torch(*_case(4))
    big = vtrace(log_rhos.abs() + 30.0, rewards, values, dones, 0.99, 1.0, 1.0)
    at_bar = vtrace(torch.zeros_like(log_rhos), rewards, values, dones, 0.99, 1.0, 1.0)
    for a, b in zip(big, at_bar):
        torch.testing.assert_close(a, b)
        assert torch.isfinite(a).all()
