"""Action distributions for the action spaces the sampler allocates for:
Discrete, MultiDiscrete (and Tuple of Discrete, flattened to it) and Box."""

from __future__ import annotations

import math
from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Distribution, Normal

# Argument validation costs more than the sampling itself for small batches, on every step.
Distribution.set_default_validate_args(False)


def discrete_sizes(space: gym.Space) -> list:
    if isinstance(space, gym.spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(space.nvec).ravel()]
    if isinstance(space, gym.spaces.Tuple) and all(isinstance(s, gym.spaces.Discrete) for s in space.spaces):
        return [int(s.n) for s in space.spaces]
    raise TypeError(f"not a discrete action space: {space}")


class CategoricalHead(nn.Module):
    """One or several independent categoricals (MultiDiscrete) from one linear layer."""

    def __init__(self, in_size: int, sizes: Sequence[int], single: bool):
        super().__init__()
        self.sizes, self.single = list(sizes), single
        self.linear = nn.Linear(in_size, sum(sizes))

    def distribution(self, x: torch.Tensor) -> "MultiCategorical":
        return MultiCategorical(self.linear(x).split(self.sizes, dim=-1), self.single)


class MultiCategorical:
    def __init__(self, logits: Sequence[torch.Tensor], single: bool):
        self.dists = [Categorical(logits=lg) for lg in logits]
        self.single = single

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


class GaussianHead(nn.Module):
    """Diagonal Gaussian; std is state-dependent (adaptive) or a learned vector."""

    def __init__(self, in_size: int, space: gym.spaces.Box, adaptive: bool, initial_std: float, tanh_scale: float):
        super().__init__()
        n = int(np.prod(space.shape))
        self.adaptive, self.tanh_scale = adaptive, tanh_scale
        self.mean = nn.Linear(in_size, n)
        if adaptive:
            self.log_std = nn.Linear(in_size, n)
        else:
            self.log_std_param = nn.Parameter(torch.full((n,), math.log(initial_std)))

    def distribution(self, x: torch.Tensor) -> "DiagGaussian":
        mu = self.mean(x)
        if self.tanh_scale > 0:
            mu = torch.tanh(mu / self.tanh_scale) * self.tanh_scale
        log_std = self.log_std(x) if self.adaptive else self.log_std_param.expand_as(mu)
        return DiagGaussian(mu, log_std.clamp(-4.0, 2.0).exp())


class DiagGaussian:
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


def make_action_head(in_size: int, space: gym.Space, model_cfg) -> nn.Module:
    if isinstance(space, gym.spaces.Box):
        return GaussianHead(in_size, space, model_cfg.adaptive_stddev, model_cfg.initial_stddev, model_cfg.continuous_tanh_scale)
    return CategoricalHead(in_size, discrete_sizes(space), single=isinstance(space, gym.spaces.Discrete))
