"""Generalized Advantage Estimation over [B, T] trajectories.

`gae` computes every step's sum at once: A_t = sum_{k >= t} W[t, k] delta_k with W[t, k] =
(gamma lam)^(k - t) while no episode ends in t..k-1, else 0 (`discount_weights`), one batched
matrix product over time instead of a Python loop of T steps. Its cost grows with B T^2, the
loop's with T (per-step overhead): benchmarks/learner_update.py --advantages measured (CPU, one
thread) 176 against 836 us at B = 32, T = 32 (the CartPole and Doom defaults' batches), 273
against 878 at B = 64, 785 against 880 at B = 256 (where V-trace's matrix form already loses); so on
CPU the matrix is
used up to MATRIX_ELEMENTS_CPU = B T^2, on CUDA (where each loop step is kernel launches) up to
MAX_MATRIX_STEPS steps. Otherwise `gae_loop`, the backward recursion (also the tests' reference
for the matrix form)."""

from __future__ import annotations

import torch

MAX_MATRIX_STEPS = 256  # longest rollout computed with the [B, T, T] weight matrix (its memory)
MATRIX_ELEMENTS_CPU = 2**17  # largest B T^2 computed with the matrix on CPU (above, the loop costs less)


def use_matrix(x: torch.Tensor) -> bool:
    """Whether the [B, T, T] weights pay for a [B, T] batch on x's device (measured, above)."""
    rows, steps = x.shape[0], x.shape[1]
    if steps > MAX_MATRIX_STEPS:
        return False
    return x.device.type != "cpu" or rows * steps * steps <= MATRIX_ELEMENTS_CPU


def episode_mask(dones: torch.Tensor) -> torch.Tensor:
    """[B, T, T] True where k >= t and steps t and k belong to one episode (no done among
    t..k-1). dones: [B, T] of 0/1."""
    steps = dones.shape[1]
    started = torch.cumsum(dones, dim=1) - dones  # episodes ended before step t
    same = started[:, :, None] == started[:, None, :]
    ahead = torch.ones(steps, steps, dtype=torch.bool, device=dones.device).triu()
    return same & ahead


def discount_weights(dones: torch.Tensor, factor: float) -> torch.Tensor:
    """[B, T, T] W[t, k] = factor^(k - t) where k >= t in the same episode, else 0."""
    steps = dones.shape[1]
    t = torch.arange(steps, device=dones.device)
    gap = (t[None, :] - t[:, None]).clamp(min=0).to(dones.dtype)
    powers = torch.pow(torch.tensor(factor, dtype=dones.dtype, device=dones.device), gap)  # 0^0 = 1
    return torch.where(episode_mask(dones), powers, torch.zeros((), dtype=dones.dtype, device=dones.device))


def weighted_sums(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """[B, T]: sum_k weights[:, t, k] x[:, k], in x's dtype even under autocast (a bf16 matmul
    would cost the estimates ~3 significant digits)."""
    with torch.autocast(x.device.type, enabled=False):
        return torch.bmm(weights, x.unsqueeze(-1)).squeeze(-1)


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float, lam: float):
    """rewards, dones: [B, T] (dones 0/1); values: [B, T + 1] (last column bootstraps).
    dones[:, t] = 1 means the episode ended after step t, so V(s_{t+1}) is not used.
    Returns (advantages, returns), both [B, T]."""
    steps = rewards.shape[1]
    if not use_matrix(rewards):
        return gae_loop(rewards, values, dones, gamma, lam)
    deltas = rewards + gamma * values[:, 1:] * (1.0 - dones) - values[:, :steps]
    advantages = weighted_sums(discount_weights(dones, gamma * lam), deltas)
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
