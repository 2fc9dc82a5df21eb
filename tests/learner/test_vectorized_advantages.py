"""GAE and V-trace computed without a loop over time (advantages.py `reverse_scan`: blocks of matrix
products) against their backward recursions, `gae_loop` and `vtrace_loop` (each checked against its
definition in test_advantages_and_losses.py / test_vtrace_loss.py), and `reverse_scan` against its own
definition."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sf_hydra.learner import advantages, vtrace
from sf_hydra.learner.advantages import SCAN_BLOCK, gae, gae_loop, reverse_scan
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


# one block, several blocks (padded), blocks of blocks (1,100 = 35 blocks: two levels), LeanRL's rollout
SHAPES = [(1, 1), (3, 2), (32, 32), (64, 32), (5, 33), (7, 100), (3, 1100), (2, 2048)]
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


def _definition(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """y_t = sum_{k >= t} (a_t ... a_{k-1}) x_k, term by term in float64."""
    y = torch.zeros_like(x, dtype=torch.float64)
    for t in range(x.shape[1]):
        product = torch.ones(x.shape[0], dtype=torch.float64)
        for k in range(t, x.shape[1]):
            y[:, t] += product * x[:, k].double()
            product = product * a[:, k].double()
    return y


@pytest.mark.parametrize("block", sorted({2, 3, 5, 32, SCAN_BLOCK}))
@pytest.mark.parametrize("steps", [1, 2, 7, 31, 32, 33, 70])
def test_reverse_scan_is_its_definition(steps, block):
    """Coefficients in [0, 1.5), exact zeros among them (an episode's end, a vanished trace), every block size
    that divides the steps or not, and levels of blocks (7 steps in blocks of 2: 4, 2, 1)."""
    g = torch.Generator().manual_seed(steps * 10 + block)
    x = torch.randn(4, steps, generator=g, dtype=torch.float64)
    a = 1.5 * torch.rand(4, steps, generator=g, dtype=torch.float64)
    a[torch.rand(4, steps, generator=g) < 0.1] = 0.0
    torch.testing.assert_close(reverse_scan(x, a, block), _definition(x, a), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(reverse_scan(x.float(), a.float(), block), _definition(x, a).float(),
                               rtol=2e-5, atol=2e-5)


def test_reverse_scan_refuses_blocks_of_one_step():
    with pytest.raises(ValueError, match="block=1"):
        reverse_scan(torch.zeros(1, 4), torch.zeros(1, 4), 1)


class CountsOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def _ops(fn) -> int:
    with CountsOps() as mode:
        fn()
    return mode.ops


def test_no_python_loop_over_time():
    """The torch operations one call dispatches grow with the levels of blocks (log T), not with T: 2,048 steps
    (LeanRL's rollout) take at most 3x those of 64 (~130 against ~65; the loop dispatches ~14 a step: ~28,000)."""
    costs = {}
    for steps in (64, 2048):
        log_rhos, rewards, values, dones = _batch(steps, 4, steps, torch.float32)
        costs[steps] = (_ops(lambda: gae(rewards, values, dones, 0.99, 0.95)),
                        _ops(lambda: vtrace_fn(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0)))
    assert costs[2048][0] <= 3 * costs[64][0] and costs[2048][1] <= 3 * costs[64][1], costs
    assert _ops(lambda: gae_loop(rewards, values, dones, 0.99, 0.95)) > 10 * costs[2048][0]  # the count sees a loop


def test_many_rows_on_cpu_use_the_loop(monkeypatch):
    """Above SCAN_ROWS_CPU rows the loop runs (no scan built); the result is the same."""
    log_rhos, rewards, values, dones = _batch(3, 4, 12, torch.float64)
    expected = gae(rewards, values, dones, 0.99, 0.95)
    expected_v = vtrace_fn(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0)
    assert advantages.use_scan(rewards)
    monkeypatch.setattr(advantages, "SCAN_ROWS_CPU", 3)
    scans = []
    monkeypatch.setattr(advantages, "reverse_scan", lambda *a: scans.append(a))
    monkeypatch.setattr(vtrace, "reverse_scan", lambda *a: scans.append(a))
    for got, want in zip(gae(rewards, values, dones, 0.99, 0.95), expected):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for got, want in zip(vtrace_fn(log_rhos, rewards, values, dones, 0.99, 1.0, 1.0), expected_v):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert not scans
