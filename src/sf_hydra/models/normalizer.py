"""Running mean/std normalization, kept in module buffers so it is checkpointed and
published to the rollout workers together with the weights."""

from __future__ import annotations

import torch
from torch import nn


class RunningMeanStd(nn.Module):
    """Parallel-algorithm running mean/var (Chan et al.), updated by the learner only."""

    def __init__(self, shape=(), eps: float = 1e-5, clip: float = 5.0):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(eps, dtype=torch.float64))
        self.clip = clip
        self.eps = eps

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.reshape(-1, *self.mean.shape).double()
        batch_mean, batch_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean += delta * n / total
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        std = torch.sqrt(self.var.float() + self.eps)
        return ((x - self.mean.float()) / std).clamp(-self.clip, self.clip)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sqrt(self.var.float() + self.eps) + self.mean.float()


class ObservationPreprocessor(nn.Module):
    """Scales raw observations (obs_subtract_mean, obs_scale) then optionally normalizes
    the float, non-image keys with running statistics."""

    def __init__(self, obs_shapes: dict, obs_scale: float, obs_subtract_mean: float, normalize: bool):
        super().__init__()
        self.obs_scale, self.obs_subtract_mean = obs_scale, obs_subtract_mean
        self.norms = nn.ModuleDict(
            {k: RunningMeanStd(tuple(s)) for k, s in obs_shapes.items() if normalize and len(s) == 1}
        )

    def forward(self, obs: dict) -> dict:
        out = {}
        for key, x in obs.items():
            x = (x.float() - self.obs_subtract_mean) / self.obs_scale
            out[key] = self.norms[key].normalize(x) if key in self.norms else x
        return out

    def update(self, obs: dict) -> None:
        for key, norm in self.norms.items():
            norm.update((obs[key].float() - self.obs_subtract_mean) / self.obs_scale)
