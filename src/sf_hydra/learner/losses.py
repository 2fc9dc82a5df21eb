"""PPO losses, readable top to bottom. Sample Factory's unbiased clip: the ratio is kept in
[1/(1+e), 1+e] rather than [1-e, 1+e]."""

from __future__ import annotations

import torch


def policy_loss(log_probs, old_log_probs, advantages, clip_ratio: float):
    ratio = torch.exp(log_probs - old_log_probs)
    clipped = torch.clamp(ratio, 1.0 / (1.0 + clip_ratio), 1.0 + clip_ratio)
    loss = -torch.min(ratio * advantages, clipped * advantages).mean()
    clip_fraction = ((ratio < 1.0 / (1.0 + clip_ratio)) | (ratio > 1.0 + clip_ratio)).float().mean()
    return loss, ratio, clip_fraction


def value_loss(values, old_values, targets, clip_value: float):
    """Clipped value loss: the new estimate may not move more than clip_value from the one
    the behaviour policy computed, unless that is worse."""
    clipped = old_values + torch.clamp(values - old_values, -clip_value, clip_value)
    return 0.5 * torch.max((values - targets) ** 2, (clipped - targets) ** 2).mean()


def entropy_loss(entropy):
    return -entropy.mean()


def approx_kl(ratio):
    """Low-variance estimator of KL(old || new) from the probability ratio."""
    return ((ratio - 1.0) - torch.log(ratio)).mean()
