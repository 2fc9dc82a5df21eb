"""Exact divergences between the action distributions the heads build (models/action_heads.py).

The KL penalty (algo.kl_loss_coeff) compares the current policy with the behaviour policy
whose distribution parameters the rollout workers recorded (trajectory field
`action_dist_params`); the symmetric-KL exploration loss compares it with a uniform prior.
Each function reduces over the last dimension and returns one value per row; the learner's
losses (learner/losses.py) average those values. They live with the models, below the
learner, because the distributions' own `kl_to` is built from them."""

from __future__ import annotations

import math

import torch


def categorical_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) = sum_a p(a) (log p(a) - log q(a)) of two categoricals given by (unnormalized)
    logits over the last dimension; one value per row."""
    log_p = torch.log_softmax(p_logits, dim=-1)
    log_q = torch.log_softmax(q_logits, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def gaussian_kl(p_mean, p_std, q_mean, q_std) -> torch.Tensor:
    """KL(p || q) of two diagonal Gaussians, summed over the last dimension:
    log(sq / sp) + (sp^2 + (mp - mq)^2) / (2 sq^2) - 1/2 per dimension."""
    var_ratio = (p_std / q_std) ** 2
    mean_term = ((p_mean - q_mean) / q_std) ** 2
    return (0.5 * (var_ratio + mean_term - 1.0) - torch.log(p_std / q_std)).sum(-1)


def symmetric_kl_with_uniform(logits: torch.Tensor) -> torch.Tensor:
    """(KL(p || u) + KL(u || p)) / 2 for the categorical p given by `logits` (last dimension, n
    actions) and the uniform u = 1/n. Unlike the entropy, it grows without bound as any
    action's probability goes to 0 (Sample Factory's `exploration_loss=symmetric_kl`)."""
    log_p = torch.log_softmax(logits, dim=-1)
    n = logits.shape[-1]
    log_u = -math.log(n)
    kl_p_u = (log_p.exp() * (log_p - log_u)).sum(-1)
    kl_u_p = ((log_u - log_p) / n).sum(-1)
    return 0.5 * (kl_p_u + kl_u_p)
