"""Generalized Advantage Estimation over [B, T] trajectories.

A_t = delta_t + gamma lam (1 - d_t) A_{t+1} is a linear recurrence read backwards in time, as is
V-trace's (vtrace.py). `reverse_scan` computes such a recurrence with no Python loop over time:
the T steps are cut into blocks of SCAN_BLOCK; inside a block every step's sum is one batched
matrix product by the products of the coefficients (exact products, at most SCAN_BLOCK factors);
across blocks the same recurrence runs on the blocks' first steps (T / SCAN_BLOCK of them,
recursively). Its cost grows with B T SCAN_BLOCK, for any rollout length; the former [B, T, T]
matrix grew with B T^2 and gave way to a loop of T Python steps above B T^2 = 2^17 on CPU (every
rollout of 128 steps; LeanRL's 2,048). On CPU (one thread) the loop, whose ~14 operations a
step serve every row at once, still costs less with many rows (`benchmarks/learner_update.py
--advantages`; the figures: docs/results.md). So on CPU the scan runs up to SCAN_ROWS_CPU rows.
`gae_loop` is the backward recursion, also the tests' reference."""

from __future__ import annotations

import torch
import torch.nn.functional as F

SCAN_BLOCK = 8  # steps per block of reverse_scan (8 and 16 measured alike; 32 costs 2-4x at 256+ rows)
SCAN_ROWS_CPU = 256  # on CPU, more rows than this: the loop over time (above)


def use_scan(x: torch.Tensor) -> bool:
    """Whether `reverse_scan` pays for a [B, T] batch on x's device (always on an accelerator)."""
    return x.device.type != "cpu" or x.shape[0] <= SCAN_ROWS_CPU


def reverse_scan(x: torch.Tensor, a: torch.Tensor, block: int = SCAN_BLOCK) -> torch.Tensor:
    """[B, T] y with y_t = x_t + a_t y_{t+1} and y_T = 0, that is y_t = sum_{k >= t} (a_t ... a_{k-1}) x_k,
    in x's dtype whatever autocast is on (a bf16 matrix product would cost ~3 significant digits)."""
    if block < 2:
        raise ValueError(f"reverse_scan: block={block}, must be >= 2 (each level must shorten the sequence)")
    rows, steps = x.shape
    if steps == 0:
        return x.clone()
    with torch.autocast(x.device.type, enabled=False):
        size = min(block, steps)
        n = -(-steps // size)
        pad = n * size - steps  # padded steps: x = 0 and a = 0, after the last real one
        xb = F.pad(x, (0, pad)).reshape(rows * n, size)
        ab = F.pad(a.to(x.dtype), (0, pad)).reshape(rows * n, size)
        upper = torch.ones(size, size, dtype=torch.bool, device=x.device).triu()  # [i, m]: m >= i
        one = torch.ones((), dtype=x.dtype, device=x.device)
        through = torch.cumprod(torch.where(upper, ab[:, None, :], one), dim=2)  # [i, k] = a_i ... a_k (k >= i)
        before = torch.cat([torch.ones_like(through[:, :, :1]), through[:, :, :-1]], dim=2)  # a_i ... a_{k-1}
        weights = torch.where(upper, before, torch.zeros((), dtype=x.dtype, device=x.device))
        local = torch.bmm(weights, xb.unsqueeze(-1)).squeeze(-1)  # the sums that stay inside each block
        if n == 1:
            return local[:, :steps]
        local, carry = local.reshape(rows, n, size), through[:, :, -1].reshape(rows, n, size)
        firsts = reverse_scan(local[:, :, 0], carry[:, :, 0], block)  # y at each block's first step
        after = torch.cat([firsts[:, 1:], torch.zeros_like(firsts[:, :1])], dim=1)  # y where the next block starts
        return (local + carry * after[:, :, None]).reshape(rows, n * size)[:, :steps]


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float, lam: float):
    """rewards, dones: [B, T] (dones 0/1); values: [B, T + 1] (last column bootstraps).
    dones[:, t] = 1 means the episode ended after step t, so V(s_{t+1}) is not used.
    Returns (advantages, returns), both [B, T]."""
    steps = rewards.shape[1]
    if not use_scan(rewards):
        return gae_loop(rewards, values, dones, gamma, lam)
    not_done = 1.0 - dones
    deltas = rewards + gamma * values[:, 1:] * not_done - values[:, :steps]
    advantages = reverse_scan(deltas, gamma * lam * not_done)
    return advantages, advantages + values[:, :steps]


def gae_loop(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float, lam: float):
    """`gae` as the backward recursion A_t = delta_t + gamma lam (1 - d_t) A_{t+1}, one step at a time."""
    steps = rewards.shape[1]
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(steps)):
        not_done = 1.0 - dones[:, t]
        delta = rewards[:, t] + gamma * values[:, t + 1] * not_done - values[:, t]
        running = delta + gamma * lam * not_done * running
        advantages[:, t] = running
    return advantages, advantages + values[:, :steps]
