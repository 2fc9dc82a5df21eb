"""Action distributions for the action spaces the sampler allocates for:
Discrete, MultiDiscrete (and Tuple of Discrete, flattened to it), Box, and Tuples that mix
Discrete and Box parts (a product of independent heads).

Each distribution can also give its parameters as one flat vector per row (`params()`: the
logits, or the means then the stds) and the exact KL(itself || old) to such a vector
(`kl_to(old_params)`, Sample Factory's direction): the rollout workers record the behaviour
policy's parameters when the learner's KL penalty needs them (trajectory field
`action_dist_params`, `params_size` numbers per step, a head attribute)."""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Distribution, Normal

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.spaces import discrete_sizes, is_mixed_tuple, tuple_action_widths
from sf_hydra.models.kl import categorical_kl, gaussian_kl, symmetric_kl_with_uniform

# Argument validation costs more than the sampling itself for small batches, on every step.
Distribution.set_default_validate_args(False)


class CategoricalHead(nn.Module):
    """One or several independent categoricals (MultiDiscrete) from one linear layer."""

    def __init__(self, in_size: int, sizes: Sequence[int], single: bool):
        super().__init__()
        self.sizes, self.single = list(sizes), single
        self.linear = nn.Linear(in_size, sum(sizes))
        self.params_size = sum(sizes)  # the logits of every categorical

    def distribution(self, x: torch.Tensor, action_mask: Optional[torch.Tensor] = None) -> "MultiCategorical":
        """`action_mask` ([rows, sum(sizes)], 0 = forbidden): see `masked_logits`."""
        return self.from_logits(self.linear(x), action_mask)

    def from_logits(self, logits: torch.Tensor, action_mask: Optional[torch.Tensor] = None) -> "MultiCategorical":
        """The distribution of this head's raw `logits` ([rows, sum(sizes)]; FusedPolicies computes
        them for several policies at once)."""
        if action_mask is None:
            return MultiCategorical(logits.split(self.sizes, dim=-1), self.single)
        parts = masked_logits(logits, action_mask).split(self.sizes, dim=-1)
        return MultiCategorical([torch.log_softmax(lg, dim=-1) for lg in parts], self.single)


def masked_logits(logits: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Forbidden actions' logits (mask 0) set to the dtype's lowest finite number: their
    softmax probability is exactly 0 (exp underflows), every log-probability, entropy and KL
    stays finite, and no gradient reaches a forbidden logit. CategoricalHead then takes the
    log-softmax of each categorical's logits: torch's Categorical would normalize a row whose
    actions are all forbidden (an unused buffer row) to log-probabilities 0 instead of
    -log(n), where log_softmax keeps it the exact uniform distribution."""
    return logits.masked_fill(action_mask.reshape(logits.shape) == 0, torch.finfo(logits.dtype).min)


# The uniform draws of gumbel_argmax lie in [GUMBEL_LOW, 1): never 0, so every Gumbel noise is finite.
GUMBEL_LOW = torch.finfo(torch.float32).tiny


def gumbel_argmax(logp: torch.Tensor) -> torch.Tensor:
    """One draw per row from the categorical with log-probabilities `logp` [rows, n] (logits do
    too: a row's constant shift changes nothing): argmax(logp + G), G = -log(-log(U)) i.i.d. Gumbel,
    as [rows, 1] indices (Gumbel-max: P(argmax = i) = softmax(logp)_i). U is drawn in float32 from
    [tiny, 1) (torch's global generator, one uniform per entry), so G lies within about
    [-4.5, 16.7]: a forbidden action's logit (masked_logits: the lowest finite number) plus G stays
    below every allowed one, so it is never drawn while its row has an allowed action."""
    u = torch.empty(logp.shape, dtype=torch.float32, device=logp.device).uniform_(GUMBEL_LOW, 1.0)
    return (logp.float() - u.log_().neg_().log_()).argmax(-1, keepdim=True)


class MultiCategorical:
    def __init__(self, logits: Sequence[torch.Tensor], single: bool):
        self.logits, self.single = logits, single
        self._dists = None

    @property
    def dists(self):
        """torch's Categoricals, built when the learner asks for log-probs or entropy."""
        if self._dists is None:
            self._dists = [Categorical(logits=lg) for lg in self.logits]
        return self._dists

    def act(self, deterministic: bool = False):
        """(actions, their log-probability) for acting, without building torch's distribution
        objects: per categorical one log-softmax, one Gumbel-max draw (`gumbel_argmax`) and one
        gather. Cheaper than torch.multinomial on the small batches a worker acts on
        (benchmarks/act_call.py)."""
        if self.single:
            logp = torch.log_softmax(self.logits[0], dim=-1)
            a = logp.argmax(-1, keepdim=True) if deterministic else gumbel_argmax(logp)
            return a.squeeze(-1), logp.gather(-1, a).squeeze(-1)
        acts, log_probs = [], []
        for lg in self.logits:
            logp = torch.log_softmax(lg, dim=-1)
            a = logp.argmax(-1, keepdim=True) if deterministic else gumbel_argmax(logp)
            acts.append(a)
            log_probs.append(logp.gather(-1, a))
        return torch.cat(acts, dim=-1), torch.cat(log_probs, dim=-1).sum(-1)

    def sample(self) -> torch.Tensor:
        acts = torch.stack([d.sample() for d in self.dists], dim=-1)
        return acts[..., 0] if self.single else acts

    def mode(self) -> torch.Tensor:
        acts = torch.stack([d.probs.argmax(-1) for d in self.dists], dim=-1)
        return acts[..., 0] if self.single else acts

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        acts = actions.unsqueeze(-1) if self.single else actions
        return sum(d.log_prob(acts[..., i]) for i, d in enumerate(self.dists))

    def entropy(self) -> torch.Tensor:
        return sum(d.entropy() for d in self.dists)

    def params(self) -> torch.Tensor:
        """Every categorical's logits, concatenated."""
        return self.logits[0] if len(self.logits) == 1 else torch.cat(list(self.logits), dim=-1)

    def kl_to(self, old_params: torch.Tensor) -> torch.Tensor:
        """KL(self || old), summed over the independent categoricals."""
        old = old_params.split([lg.shape[-1] for lg in self.logits], dim=-1)
        return sum(categorical_kl(lg, o) for o, lg in zip(old, self.logits))

    def symmetric_kl_with_uniform_prior(self) -> torch.Tensor:
        return sum(symmetric_kl_with_uniform(lg) for lg in self.logits)


class GaussianHead(nn.Module):
    """Diagonal Gaussian over a Box; std is state-dependent (adaptive) or a learned vector.

    Two ways to respect the Box bounds:
    - `tanh_scale > 0` squashes only the means (Sample Factory's way): samples may still leave
      the box; the sampler clips them on their way to env.step (spaces.to_env_action)
      and the learner sees the unclipped sample with its exact Gaussian log-prob.
    - `squash` samples u ~ N(mu, std) and acts a = tanh(u) rescaled to [low, high]: actions are
      in the box by construction and the log-prob carries the change of variables.
    """

    def __init__(self, in_size: int, space: gym.spaces.Box, adaptive: bool, initial_std: float, tanh_scale: float,
                 squash: bool = False):
        super().__init__()
        n = int(np.prod(space.shape))
        self.adaptive, self.tanh_scale, self.squash = adaptive, tanh_scale, squash
        self.mean = nn.Linear(in_size, n)
        self.params_size = 2 * n  # the means, then the stds
        if adaptive:
            self.log_std = nn.Linear(in_size, n)
        else:
            self.log_std_param = nn.Parameter(torch.full((n,), math.log(initial_std)))
        if squash:
            center, half_range = box_center_and_half_range(space)
            # Not in the state dict: derived from the space, the same in every process.
            self.register_buffer("center", center, persistent=False)
            self.register_buffer("half_range", half_range, persistent=False)

    def distribution(self, x: torch.Tensor) -> "DiagGaussian | TanhDiagGaussian":
        mu = self.mean(x)
        if self.tanh_scale > 0:
            mu = torch.tanh(mu / self.tanh_scale) * self.tanh_scale
        log_std = self.log_std(x) if self.adaptive else self.log_std_param.expand_as(mu)
        std = log_std.clamp(-4.0, 2.0).exp()
        if self.squash:
            return TanhDiagGaussian(mu, std, self.center, self.half_range)
        return DiagGaussian(mu, std)


def box_center_and_half_range(space: gym.spaces.Box):
    """Flat float tensors; squashing needs finite bounds (a tanh cannot reach infinity)."""
    low, high = np.asarray(space.low, np.float64).ravel(), np.asarray(space.high, np.float64).ravel()
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ConfigError("model.tanh_squash_actions", True,
                          f"false for this action space {space}: squashing needs finite bounds")
    center, half_range = (high + low) / 2.0, (high - low) / 2.0
    return torch.as_tensor(center, dtype=torch.float32), torch.as_tensor(half_range, dtype=torch.float32)


class GaussianParams:
    """For a distribution driven by a diagonal Normal `self.normal` over u: its parameters as
    recorded in trajectories, and the exact KL from recorded ones."""

    def params(self) -> torch.Tensor:
        """The means, then the standard deviations (of u, before any squashing)."""
        return torch.cat([self.normal.loc, self.normal.scale], dim=-1)

    def kl_to(self, old_params: torch.Tensor) -> torch.Tensor:
        """KL(self || old) of the diagonal Gaussians (exact for the squashed one too: the same
        invertible squashing of both leaves the KL unchanged)."""
        old_mean, old_std = old_params.chunk(2, dim=-1)
        return gaussian_kl(self.normal.loc, self.normal.scale, old_mean, old_std)


class DiagGaussian(GaussianParams):
    def __init__(self, mu: torch.Tensor, std: torch.Tensor):
        self.normal = Normal(mu, std)

    def sample(self) -> torch.Tensor:
        return self.normal.sample()

    def mode(self) -> torch.Tensor:
        return self.normal.mean

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return self.normal.log_prob(actions).sum(-1)

    def entropy(self) -> torch.Tensor:
        return self.normal.entropy().sum(-1)


class TanhDiagGaussian(GaussianParams):
    """a = center + half_range * tanh(u), u ~ N(mu, std), per dimension:
    log p(a) = log N(u) - log(half_range) - log(1 - tanh(u)^2).

    The buffers store `a`, so log_prob recovers u = atanh(y) with y = (a - center) / half_range
    kept just inside (-1, 1): a float32 tanh saturates to exactly +-1 for |u| > ~9, where the
    density would be infinite. The rollout worker and the learner both evaluate the stored `a`
    this way, so the behaviour and the learner's log-probs agree and the PPO ratio is exact.
    """

    EDGE = 1e-6  # y is clamped to [-1 + EDGE, 1 - EDGE] (representable in float32)

    def __init__(self, mu: torch.Tensor, std: torch.Tensor, center: torch.Tensor, half_range: torch.Tensor):
        self.normal = Normal(mu, std)
        self.center, self.half_range = center, half_range

    def _squash(self, u: torch.Tensor) -> torch.Tensor:
        return self.center + self.half_range * torch.tanh(u)

    def sample(self) -> torch.Tensor:
        return self._squash(self.normal.sample())

    def mode(self) -> torch.Tensor:
        return self._squash(self.normal.mean)

    def _log_det_jacobian(self, y: torch.Tensor) -> torch.Tensor:
        """log |da/du| per dimension, from y = tanh(u)."""
        return torch.log(self.half_range) + torch.log1p(-y * y)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        y = ((actions - self.center) / self.half_range).clamp(-1.0 + self.EDGE, 1.0 - self.EDGE)
        return (self.normal.log_prob(torch.atanh(y)) - self._log_det_jacobian(y)).sum(-1)

    def entropy(self) -> torch.Tensor:
        """H(a) = H(u) + E[log |da/du|] has no closed form: a one-sample, reparameterized
        estimate of the second term (unbiased, and its gradient reaches mu and std)."""
        u = self.normal.rsample()
        y = torch.tanh(u)
        return (self.normal.entropy() + self._log_det_jacobian(y.clamp(-1.0 + self.EDGE, 1.0 - self.EDGE))).sum(-1)


class TupleHead(nn.Module):
    """A mixed Tuple of Discrete and Box parts: one head per part (a categorical or a diagonal
    Gaussian), all reading the same features; the parts are independent given them."""

    def __init__(self, in_size: int, space: gym.spaces.Tuple, model_cfg):
        super().__init__()
        self.parts = nn.ModuleList(make_action_head(in_size, s, model_cfg) for s in space.spaces)
        self.widths = tuple_action_widths(space)
        self.param_sizes = [p.params_size for p in self.parts]
        self.params_size = sum(self.param_sizes)
        # Each categorical part's share of an action mask (its number of choices; Box parts: 0).
        self.mask_sizes = [p.params_size if isinstance(p, CategoricalHead) else 0 for p in self.parts]

    def distribution(self, x: torch.Tensor, action_mask: Optional[torch.Tensor] = None) -> "ProductDistribution":
        masks = [None] * len(self.parts)
        if action_mask is not None:
            masks = [m if n else None for m, n in zip(action_mask.split(self.mask_sizes, dim=-1), self.mask_sizes)]
        dists = [p.distribution(x, m) if m is not None else p.distribution(x) for p, m in zip(self.parts, masks)]
        return ProductDistribution(dists, self.widths, self.param_sizes)


class ProductDistribution:
    """Independent parts over one flat float action vector (spaces.action_spec of a mixed
    Tuple: each part's numbers in order, a categorical's index as a float). log_prob and
    entropy are the sums of the parts' (independence); params() concatenates the parts'
    params(), and kl_to() sums the parts' exact KLs (the KL of a product of independent
    distributions)."""

    def __init__(self, dists: List, widths: List[int], param_sizes: List[int]):
        self.dists, self.widths, self.param_sizes = dists, widths, param_sizes

    @staticmethod
    def _flat(d, a: torch.Tensor) -> torch.Tensor:
        return a.float().unsqueeze(-1) if isinstance(d, MultiCategorical) else a

    def sample(self) -> torch.Tensor:
        return torch.cat([self._flat(d, d.sample()) for d in self.dists], dim=-1)

    def mode(self) -> torch.Tensor:
        return torch.cat([self._flat(d, d.mode()) for d in self.dists], dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        parts = actions.split(self.widths, dim=-1)
        return sum(d.log_prob(a[..., 0].long() if isinstance(d, MultiCategorical) else a)
                   for d, a in zip(self.dists, parts))

    def entropy(self) -> torch.Tensor:
        return sum(d.entropy() for d in self.dists)

    def params(self) -> torch.Tensor:
        return torch.cat([d.params() for d in self.dists], dim=-1)

    def kl_to(self, old_params: torch.Tensor) -> torch.Tensor:
        return sum(d.kl_to(o) for d, o in zip(self.dists, old_params.split(self.param_sizes, dim=-1)))


def make_action_head(in_size: int, space: gym.Space, model_cfg) -> nn.Module:
    """The default `model.action_head`: Gaussian for a Box, a product of heads for a mixed
    Tuple, categorical(s) otherwise. A user's head is called the same way; its
    `distribution(x)` offers sample, mode, log_prob, entropy. With an action mask in the
    observations, ActorCritic calls `distribution(x, action_mask)`."""
    if isinstance(space, gym.spaces.Box):
        return GaussianHead(in_size, space, model_cfg.adaptive_stddev, model_cfg.initial_stddev,
                            model_cfg.continuous_tanh_scale, model_cfg.tanh_squash_actions)
    if is_mixed_tuple(space):
        return TupleHead(in_size, space, model_cfg)
    return CategoricalHead(in_size, discrete_sizes(space), single=isinstance(space, gym.spaces.Discrete))
