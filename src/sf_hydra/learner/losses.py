"""PPO losses, readable top to bottom. Sample Factory's unbiased clip: the ratio is kept in
[1/(1+e), 1+e] rather than [1-e, 1+e].

Each loss is a mean over the transitions; `valid` (a 0/1 tensor shaped like the losses'
inputs, or None for all) restricts it to the transitions a policy is trained on (with
several policies, a trajectory may hold another policy's episodes)."""

from __future__ import annotations

from typing import Optional

import torch


def masked_mean(x: torch.Tensor, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The mean of `x` over the entries where `valid` is 1 (all entries when None; 0 if none is)."""
    if valid is None:
        return x.mean()
    return (x * valid).sum() / valid.sum().clamp(min=1.0)


def policy_loss(log_probs, old_log_probs, advantages, clip_ratio: float, valid=None):
    """The clipped surrogate. An invalid transition's ratio is taken as 1 (another policy's
    behaviour log-prob could make it overflow, and inf * 0 is NaN)."""
    log_ratio = log_probs - old_log_probs
    ratio = torch.exp(log_ratio if valid is None else log_ratio * valid)
    clipped = torch.clamp(ratio, 1.0 / (1.0 + clip_ratio), 1.0 + clip_ratio)
    loss = -masked_mean(torch.min(ratio * advantages, clipped * advantages), valid)
    clip_fraction = masked_mean(((ratio < 1.0 / (1.0 + clip_ratio)) | (ratio > 1.0 + clip_ratio)).float(), valid)
    return loss, ratio, clip_fraction


def value_loss(values, old_values, targets, clip_value: float, valid=None):
    """Clipped value loss: the new estimate may not move more than clip_value from the one
    the behaviour policy computed, unless that is worse. The mean squared error without a
    factor 1/2, as Sample Factory's, so that algo.value_loss_coeff weighs it as its flag does."""
    clipped = old_values + torch.clamp(values - old_values, -clip_value, clip_value)
    return masked_mean(torch.max((values - targets) ** 2, (clipped - targets) ** 2), valid)


def entropy_loss(entropy, valid=None):
    return -masked_mean(entropy, valid)


def approx_kl(ratio, valid=None):
    """Low-variance estimator of KL(old || new) from the probability ratio."""
    return masked_mean((ratio - 1.0) - torch.log(ratio), valid)


# -- penalties built on the exact divergences (sf_hydra.models.kl) -----------------------------
# The KL penalty (algo.kl_loss_coeff) averages KL(current || behaviour), the behaviour policy's
# distribution parameters as the rollout workers recorded them (trajectory field
# `action_dist_params`); the symmetric-KL exploration loss averages the divergence from a uniform prior.


def kl_penalty_loss(kl: torch.Tensor, valid=None) -> torch.Tensor:
    """The fixed-coefficient KL penalty of the PPO paper (arXiv 1707.06347, section 4), before
    its coefficient: the mean KL(current || behaviour) per transition, Sample Factory's direction
    (the paper writes KL(behaviour || current); the two agree to second order in the step)."""
    return masked_mean(kl, valid)


SYMMETRIC_KL_CAP = 30.0  # Sample Factory's cap on the mean symmetric KL (a bound for near-deterministic policies)


def symmetric_kl_exploration_loss(kl_to_uniform: torch.Tensor, valid=None) -> torch.Tensor:
    """The exploration loss of `exploration_loss=symmetric_kl`, before its coefficient: the mean
    symmetric KL to the uniform prior, capped at SYMMETRIC_KL_CAP (minimized, like -entropy)."""
    return torch.clamp(masked_mean(kl_to_uniform, valid), max=SYMMETRIC_KL_CAP)
