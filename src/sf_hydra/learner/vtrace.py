"""V-trace (IMPALA, arXiv 1802.01561, section 4.1): value targets and policy-gradient
advantages for trajectories a lagging behaviour policy mu collected, corrected towards the
current policy pi by truncated importance weights.

For one trajectory x_0..x_T with rewards r_t and the current critic V:

    rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))         (how much a step's TD error counts)
    c_t   = min(c_bar,   pi(a_t|x_t) / mu(a_t|x_t))         (how far a correction travels back)
    delta_t = rho_t (r_t + gamma V(x_{t+1}) - V(x_t))
    v_s = V(x_s) + sum_{t>=s} gamma^(t-s) (c_s ... c_{t-1}) delta_t
        = V(x_s) + delta_s + gamma c_s (v_{s+1} - V(x_{s+1}))       (read backwards; v_T = V(x_T))
    advantage_s = rho_s (r_s + gamma v_{s+1} - V(x_s))

An episode's end after step t cuts both sums (gamma becomes 0 there). With pi = mu and
rho_bar = c_bar = 1, v_s is the n-step return bootstrapped from V(x_T), i.e. GAE's target
with lambda = 1. The paper assumes rho_bar >= c_bar (config/validation.py enforces it).

`vtrace` computes every v_s at once: v_s - V(x_s) = sum_{t >= s} W[s, t] delta_t with
W[s, t] = prod_{i=s}^{t-1} gamma c_i within one episode, the products taken as exponentials of
differences of a cumulative sum of log(gamma c_i); one batched matrix product replaces the loop
over time where it pays (advantages.py `use_matrix`: at B = 32, T = 32, 279 against 1322 us of
CPU); otherwise `vtrace_loop`, the backward recursion (also the tests' reference).
"""

from __future__ import annotations

import math

import torch

from sf_hydra.learner.advantages import episode_mask, use_matrix, weighted_sums

# log c_i is floored here: a zero trace weight (an underflowed ratio) then stays finite in the
# cumulative sum; e^-60 per step is zero to float32 and float64 alike against any other term.
_LOG_FLOOR = -60.0


def vtrace(log_rhos: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
           gamma: float, rho_bar: float, c_bar: float):
    """log_rhos = log pi(a_t|x_t) - log mu(a_t|x_t), rewards, dones: [B, T] (dones 0/1); values:
    [B, T + 1] (the current critic's V(x_t), the last column bootstraps). dones[:, t] = 1: the
    episode ended after step t. Returns (value targets v_s, advantages), both [B, T]."""
    steps = rewards.shape[1]
    if not use_matrix(rewards):
        return vtrace_loop(log_rhos, rewards, values, dones, gamma, rho_bar, c_bar)
    rhos = torch.clamp(torch.exp(log_rhos), max=rho_bar)
    discounts = gamma * (1.0 - dones)
    deltas = rhos * (rewards + discounts * values[:, 1:] - values[:, :steps])
    mask = episode_mask(dones)
    if gamma > 0.0:
        log_steps = torch.clamp(log_rhos, min=_LOG_FLOOR, max=math.log(c_bar)) + math.log(gamma)
        before = torch.cumsum(log_steps, dim=1) - log_steps  # sum over i < t
        log_weights = before[:, None, :] - before[:, :, None]  # [b, s, t]: sum over s <= i < t
        weights = torch.exp(torch.where(mask, log_weights, -math.inf))
    else:  # each v_s is its own step's
        weights = torch.diag_embed(torch.ones_like(rewards))
    targets = values[:, :steps] + weighted_sums(weights, deltas)
    next_targets = torch.cat([targets[:, 1:], values[:, steps:]], dim=1)
    advantages = rhos * (rewards + discounts * next_targets - values[:, :steps])
    return targets, advantages


def vtrace_loop(log_rhos: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
                gamma: float, rho_bar: float, c_bar: float):
    """`vtrace` as the backward recursion, one step at a time."""
    steps = rewards.shape[1]
    ratios = torch.exp(log_rhos)
    rhos = torch.clamp(ratios, max=rho_bar)
    cs = torch.clamp(ratios, max=c_bar)
    discounts = gamma * (1.0 - dones)
    targets = torch.zeros_like(rewards)
    advantages = torch.zeros_like(rewards)
    next_target = values[:, steps]  # v_T = V(x_T)
    for t in reversed(range(steps)):
        next_value = values[:, t + 1]
        delta = rhos[:, t] * (rewards[:, t] + discounts[:, t] * next_value - values[:, t])
        advantages[:, t] = rhos[:, t] * (rewards[:, t] + discounts[:, t] * next_target - values[:, t])
        next_target = values[:, t] + delta + discounts[:, t] * cs[:, t] * (next_target - next_value)
        targets[:, t] = next_target
    return targets, advantages
