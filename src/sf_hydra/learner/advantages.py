"""Generalized Advantage Estimation over [B, T] trajectories."""

from __future__ import annotations

import torch


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float, lam: float):
    """rewards, dones: [B, T]; values: [B, T + 1] (last column bootstraps).
    dones[:, t] = 1 means the episode ended after step t, so V(s_{t+1}) is not used.
    Returns (advantages, returns), both [B, T]."""
    steps = rewards.shape[1]
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(steps)):
        not_done = 1.0 - dones[:, t]
        delta = rewards[:, t] + gamma * values[:, t + 1] * not_done - values[:, t]
        running = delta + gamma * lam * not_done * running
        advantages[:, t] = running
    return advantages, advantages + values[:, :steps]
