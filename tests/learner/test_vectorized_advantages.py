"""GAE and V-trace computed without a loop over time (one matrix product over the steps) against
their backward recursions, `gae_loop` and `vtrace_loop` (each checked against its definition in
test_advantages_and_losses.py / test_vtrace_loss.py)."""

from __future__ import annotations

import pytest
import torch

from sf_hydra.learner import advantages, vtrace
from sf_hydra.learner.advantages import gae, gae_loop
from sf_hydra.learner.vtrace import vtrace as vtrace_fn
from sf_hydra.learner.vtrace import vtrace_loop

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _batch(seed: int, rows: int, steps: int, dtype, done_rate: float = 0.05):
    """Random trajectories as the learner sees them: rewards with time-outs bootstrapped in
    (value_bootstrap), episode ends, some rows that never end and some that end at every step."""
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(rows, steps, generator=g, dtype=torch.float64)
    values = torch.randn(rows, steps + 1, generator=g, dtype=torch.float64)
    dones = (torch.rand(rows, steps, generator=g, dtype=torch.float64) < done_rate).double()
    time_outs = dones * (torch.rand(rows, steps, generator=g, dtype=torch.float64) < 0.3).double()
    rewards = rewards + 0.99 * values[:, :-1] * time_outs
    if rows > 2:
        dones[0] = 0.0
        dones[1] = 1.0
        dones[2, -1] = 1.0
    log_rhos = 0.5 * torch.randn(rows, steps, generator=g, dtype=torch.float64)
    return [x.to(dtype) for x in (log_rhos, rewards, values, dones)]


SHAPES = [(1, 1), (3, 2), (32, 32), (64, 32), (7, 100)]
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rows,steps", SHAPES)
@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (1.0, 1.0), (0.99, 0.0), (0.0, 0.7)])
def test_gae_equals_the_loop(rows, steps, dtype, gamma, lam):
    _, rewards, values, dones = _batch(rows * steps, rows, steps, dtype)
    adv, ret = gae(rewards, values, dones, gamma, lam)
    ref_adv, ref_ret = gae_loop(rewards, values, dones, gamma, lam)
    tol = TOLERANCE[dtype]
    assert adv.dtype == dtype
    torch.testing.assert_close(adv, ref_adv, rtol=tol, atol=tol)
    torch.testing.assert_close(ret, ref_ret, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rows,steps", SHAPES)
@pytest.mark.parametrize("gamma,rho_bar,c_bar", [(0.99, 1.0, 1.0), (0.97, 1.0, 0.5), (0.9, 2.0, 1.5),
                                                 (1.0, 1.0, 1.0), (0.0, 1.0, 1.0)])
def test_vtrace_equals_the_loop(rows, steps, dtype, gamma, rho_bar, c_bar):
    log_rhos, rewards, values, dones = _batch(rows * steps + 1, rows, steps, dtype)
    targets, adv = vtrace_fn(log_rhos, rewards, values, dones, gamma, rho_bar, c_bar)
    ref_targets, ref_adv = vtrace_loop(log_rhos, rewards, values, dones, gamma, rho_bar, c_bar)
    tol = TOLERANCE[dtype]
    assert targets.dtype == dtype
    torch.testing.assert_close(targets, ref_targets, rtol=tol, atol=tol)
    torch.testing.assert_close(adv, ref_adv, rtol=tol, atol=tol)


def test_vtrace_with_vanishing_and_huge_ratios_stays_finite():
    """A ratio that underflows to 0 (log rho -1000) cuts the trace as the loop's product does; one
    that would overflow is truncated at rho_bar / c_bar first."""
    log_rhos, rewards, values, dones = _batch(5, 4, 16, torch.float32)
    log_rhos[:, 5] = -1000.0
    log_rhos[:, 9] = 200.0
    targets, adv = vtrace_fn(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0)
    ref_targets, ref_adv = vtrace_loop(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0)
    assert torch.isfinite(targets).all() and torch.isfinite(adv).all()
    torch.testing.assert_close(targets, ref_targets, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(adv, ref_adv, rtol=1e-5, atol=1e-5)


def test_estimates_keep_full_precision_under_bf16_autocast():
    """Lightning's bf16-mixed runs the learner's step under autocast, which would compute the
    weighted sums' matrix product in bfloat16 (~3 significant digits) were they not kept out of it."""
    log_rhos, rewards, values, dones = _batch(9, 32, 32, torch.float32)
    ref_adv, _ = gae_loop(rewards, values, dones, 0.99, 0.95)
    ref_targets, _ = vtrace_loop(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        adv, _ = gae(rewards, values, dones, 0.99, 0.95)
        targets, _ = vtrace_fn(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0)
    assert adv.dtype == torch.float32
    torch.testing.assert_close(adv, ref_adv, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(targets, ref_targets, rtol=1e-5, atol=1e-5)


def test_large_batches_use_the_loop(monkeypatch):
    """Above MATRIX_ELEMENTS_CPU (B T^2) the [B, T, T] weights are not built; the result is the same."""
    _, rewards, values, dones = _batch(3, 4, 12, torch.float64)
    log_rhos = torch.zeros_like(rewards)
    expected = gae(rewards, values, dones, 0.99, 0.95)
    expected_v = vtrace_fn(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0)
    assert advantages.use_matrix(rewards)
    monkeypatch.setattr(advantages, "MATRIX_ELEMENTS_CPU", 4 * 12 * 12 - 1)
    built = []
    monkeypatch.setattr(advantages, "discount_weights", lambda *a: built.append(a))
    monkeypatch.setattr(vtrace, "episode_mask", lambda *a: built.append(a))
    for got, want in zip(gae(rewards, values, dones, 0.99, 0.95), expected):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for got, want in zip(vtrace_fn(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0), expected_v):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert not built
