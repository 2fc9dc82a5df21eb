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

`vtrace` computes every v_s at once: v_s - V(x_s) = delta_s + gamma c_s (1 - d_s) (v_{s+1} - V(x_{s+1}))
is a backward linear recurrence, run by advantages.py `reverse_scan` (no Python loop over time; on CPU
above SCAN_ROWS_CPU rows the loop, as for GAE). `vtrace_loop` is the backward recursion one step at a
time (the tests' reference).
"""

from __future__ import annotations

import torch

from sf_hydra.learner.advantages import reverse_scan, use_scan


def vtrace(log_rhos: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
           gamma: float, rho_bar: float, c_bar: float):
    """log_rhos = log pi(a_t|x_t) - log mu(a_t|x_t), rewards, dones: [B, T] (dones 0/1); values:
    [B, T + 1] (the current critic's V(x_t), the last column bootstraps). dones[:, t] = 1: the
    episode ended after step t. Returns (value targets v_s, advantages), both [B, T]."""
    steps = rewards.shape[1]
    if not use_scan(rewards):
        return vtrace_loop(log_rhos, rewards, values, dones, gamma, rho_bar, c_bar)
    ratios = torch.exp(log_rhos)  # an overflow to inf is truncated at rho_bar / c_bar; an underflow cuts the trace
    rhos, cs = torch.clamp(ratios, max=rho_bar), torch.clamp(ratios, max=c_bar)
    discounts = gamma * (1.0 - dones)
    deltas = rhos * (rewards + discounts * values[:, 1:] - values[:, :steps])
    targets = values[:, :steps] + reverse_scan(deltas, discounts * cs)
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
