"""Running mean/std normalization, kept in module buffers so it is checkpointed and
published to the rollout workers together with the weights."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch
from torch import nn

from sf_hydra.core.errors import ConfigError


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
    def update(self, x: torch.Tensor, scale: float = 1.0, subtract: float = 0.0) -> None:
        """Merges in the moments of the rows of `(x - subtract) / scale` (no rows: nothing changes). In a
        data-parallel run every learner rank calls it for its own batch and every rank merges all ranks'
        moments, in rank order: the statistics stay identical on every rank."""
        x = x.reshape(-1, *self.mean.shape)
        n = x.shape[0]
        if n == 0:
            mean, var = torch.zeros_like(self.mean), torch.zeros_like(self.var)
        elif self.mean.numel() > 4096:  # images: a float64 copy of the batch would cost more than the pass
            mean, var = self._centered_moments(x, scale, subtract)
        else:
            var, mean = torch.var_mean((x.double() - subtract) / scale, dim=0, unbiased=False)
        for rank_mean, rank_var, rank_n in _moments_of_every_rank(mean, var, n):
            if rank_n > 0:
                self._merge(rank_mean, rank_var, rank_n)

    def _centered_moments(self, x: torch.Tensor, scale: float, subtract: float, chunk: int = 32):
        """Mean and variance of many large rows in float32, a few rows at a time in one reused
        buffer (cache-sized, no float copy of the whole batch). Sums are taken around the
        running mean, so they stay small and E[d^2] - E[d]^2 loses no precision."""
        n, center = x.shape[0], self.mean.float()
        total, total_sq = torch.zeros_like(center), torch.zeros_like(center)
        buf = torch.empty((min(chunk, n), *center.shape), device=center.device)
        for start in range(0, n, chunk):
            part = buf[: min(chunk, n - start)].copy_(x[start : start + chunk])
            part.sub_(subtract).div_(scale).sub_(center)
            total += part.sum(0)
            total_sq += part.square_().sum(0)
        offset = total.double() / n
        return self.mean + offset, (total_sq.double() / n - offset**2).clamp_(min=0.0)

    def _merge(self, batch_mean: torch.Tensor, batch_var: torch.Tensor, n: int) -> None:
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean += delta * n / total
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        std = torch.sqrt(self.var.float() + self.eps)
        return ((x - self.mean.float()) / std).clamp(-self.clip, self.clip)

    def normalize_raw_(self, x: torch.Tensor, scale: float, subtract: float) -> torch.Tensor:
        """Normalizes `(x - subtract) / scale` in place on a float copy of raw observations,
        with the scaling folded into the statistics: one subtraction and one multiplication
        per element (the hot path of every act and learner pass)."""
        return self.raw_normalizer(scale, subtract)(x)

    def raw_normalizer(self, scale: float, subtract: float, like: Optional[torch.Tensor] = None):
        """normalize_raw_ as a function of x, its statistics folded once (for calls on parts of a batch);
        `like`: a tensor whose memory format the folded statistics take (elementwise passes run fastest
        when their operands share one layout)."""
        shift = self.mean.float() * scale + subtract
        inv = torch.rsqrt(self.var.float() + self.eps) / scale
        if like is not None and like.dim() == shift.dim() + 1:
            fmt = _memory_format(like)
            shift, inv = shift[None].contiguous(memory_format=fmt), inv[None].contiguous(memory_format=fmt)
        clip = self.clip
        return lambda x: x.sub_(shift).mul_(inv).clamp_(-clip, clip)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sqrt(self.var.float() + self.eps) + self.mean.float()


def _moments_of_every_rank(mean: torch.Tensor, var: torch.Tensor, n: int):
    """[(mean, var, rows)] of every learner rank's batch in rank order (torch.distributed's group, initialized
    by a data-parallel run's learner); [this process's] otherwise."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return [(mean, var, n)]
    world = torch.distributed.get_world_size()
    if world == 1:
        return [(mean, var, n)]
    mine = torch.cat([mean.reshape(-1), var.reshape(-1), torch.tensor([float(n)], dtype=mean.dtype,
                                                                      device=mean.device)])
    everyone = [torch.empty_like(mine) for _ in range(world)]
    torch.distributed.all_gather(everyone, mine)
    k = mean.numel()
    return [(t[:k].view_as(mean), t[k:2 * k].view_as(var), int(t[-1].item())) for t in everyone]


def check_normalize_input_keys(keys: Optional[Sequence[str]], obs_keys: Sequence[str]) -> None:
    """Every key of `algo.normalize_input_keys` (None: all) names an observation key of the env."""
    unknown = [k for k in keys or () if k not in obs_keys]
    if unknown:
        raise ConfigError("algo.normalize_input_keys", list(keys),
                          f"observation keys of this env ({', '.join(obs_keys)}); unknown: {', '.join(unknown)}")


class ObservationPreprocessor(nn.Module):
    """Scales raw observations (obs_subtract_mean, obs_scale) then optionally normalizes
    keys, images included, element by element with running statistics (as Sample Factory's
    normalize_input: for Doom, per-pixel normalization makes the few pixels that change, such
    as the monster, stand out from the static scene). `keys`: the keys normalized (None: all);
    the others are only scaled."""

    def __init__(self, obs_shapes: dict, obs_scale: float, obs_subtract_mean: float, normalize: bool,
                 keys: Optional[Sequence[str]] = None):
        super().__init__()
        self.obs_scale, self.obs_subtract_mean = obs_scale, obs_subtract_mean
        check_normalize_input_keys(keys, list(obs_shapes))
        chosen = [k for k in obs_shapes if keys is None or k in keys] if normalize else []
        self.norms = nn.ModuleDict({k: RunningMeanStd(tuple(obs_shapes[k])) for k in chosen})

    def forward(self, obs: dict) -> dict:
        out = {}
        for key, x in obs.items():
            low = _autocast_image_dtype(x)
            if low is None:
                x = _float_copy(x)
                out[key] = self._scaler(key, x)(x)
            else:
                out[key] = _scaled_in_chunks(x, lambda part, key=key: self._scaler(key, part), low)
        return out

    def _scaler(self, key: str, like: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        """The function that scales (and normalizes, for a key in `norms`) a float copy of raw observations
        laid out as `like` in place. Element by element: chunks of rows can be scaled one at a time."""
        scale, subtract = self.obs_scale, self.obs_subtract_mean
        if key in self.norms:
            return self.norms[key].raw_normalizer(scale, subtract, like)
        return lambda x: (x.sub_(subtract) if subtract else x).div_(scale)

    def update(self, obs: dict) -> None:
        """Running statistics of the scaled observations, from the raw batch."""
        for key, norm in self.norms.items():
            norm.update(obs[key], self.obs_scale, self.obs_subtract_mean)


# Rows of an image batch scaled at a time on the autocast path: a float32 chunk of 16 Doom frames
# (3x72x128) is ~1.8 MB, near the L2 cache (8 to 32 rows cost alike).
_CHUNK_ROWS = 16


def _autocast_image_dtype(x: torch.Tensor):
    """The low-precision dtype that CPU autocast casts an image batch to before the first conv (bfloat16
    or float16), or None: not under CPU autocast, or not a batch of images."""
    if x.dim() != 4 or x.device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return None
    dtype = torch.get_autocast_dtype("cpu")
    return dtype if dtype in (torch.bfloat16, torch.float16) else None


def _scaled_in_chunks(x: torch.Tensor, scaler: Callable[[torch.Tensor], Callable], dtype: torch.dtype) -> torch.Tensor:
    """scale_(float32 copy of x) cast to `dtype`, with scale_ = scaler(a tensor laid out as the copy), laid
    out as _float_copy lays it out, computed `_CHUNK_ROWS` rows at a time in one reused float32 buffer.
    The invariant: the result equals `scale_(_float_copy(x)).to(dtype)` bit for bit (the same float32
    arithmetic element by element, then the same rounding autocast applies at the first conv), while the
    batch's float32 copy never leaves the cache, which costs less CPU than whole-batch float32 passes (the
    figures: docs/results.md)."""
    fmt = torch.channels_last if torch.is_grad_enabled() else torch.contiguous_format
    out = torch.empty(x.shape, dtype=dtype, device=x.device, memory_format=fmt)
    rows = x.shape[0]
    buf = torch.empty((min(_CHUNK_ROWS, rows), *x.shape[1:]), dtype=torch.float32, device=x.device,
                      memory_format=fmt)
    scale_ = scaler(buf)
    for start in range(0, rows, _CHUNK_ROWS):
        stop = min(start + _CHUNK_ROWS, rows)
        part = buf[: stop - start].copy_(x[start:stop])
        out[start:stop].copy_(scale_(part))
    return out


def _memory_format(x: torch.Tensor) -> torch.memory_format:
    return torch.channels_last if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
        and not x.is_contiguous() else torch.contiguous_format


def _float_copy(x: torch.Tensor) -> torch.Tensor:
    """The one float copy of an observation batch. Images in a gradient pass (the learner's
    large batches) are laid out channels-last, faster for conv forward+backward on CPU at the learner's
    batch sizes and slower at inference batch sizes (docs/results.md)."""
    if x.dim() == 4 and torch.is_grad_enabled():
        out = torch.empty(x.shape, dtype=torch.float32, device=x.device, memory_format=torch.channels_last)
        return out.copy_(x)
    return x.to(torch.float32, copy=True)
