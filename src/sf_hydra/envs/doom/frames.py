"""Rendered frame -> observation: channel-first uint8, downsampled by an integer factor, then
optionally resized to any size by nearest neighbour (Sample Factory's res_w x res_h).

Downsampling keeps every `factor`-th pixel (stride pooling, i.e. nearest neighbour): a block
mean would cost a sizeable share of the env's own step for little gain at factor 2 (the figures:
docs/results.md).
"""

from __future__ import annotations

import numpy as np

from sf_hydra.core.errors import ConfigError


def as_chw(frame: np.ndarray) -> np.ndarray:
    """GRAY8 frames come as (H, W): add the channel axis."""
    return frame[None] if frame.ndim == 2 else frame


def obs_shape(channels: int, height: int, width: int, factor: int) -> tuple:
    return (channels, height // factor, width // factor)


def downsample(frame: np.ndarray, factor: int) -> np.ndarray:
    """(C, H, W) -> (C, H // factor, W // factor), a new contiguous array."""
    if factor == 1:
        return frame
    c, h, w = frame.shape
    return np.ascontiguousarray(frame[:, : h - h % factor : factor, : w - w % factor : factor])


def nearest_indices(size: int, out: int) -> np.ndarray:
    """The source pixel of each of `out` pixels along an axis of `size`, picked as OpenCV's INTER_NEAREST
    picks it (Sample Factory resizes Doom frames so): floor(i * size / out)."""
    return np.floor(np.arange(out) * (size / out)).astype(np.intp)


class NearestResize:
    """(C, H, W) frames -> contiguous (C, height, width) by nearest neighbour: one np.take of the flat
    pixel indices (measured ~30 us for 3x120x160 -> 3x72x128; indexing rows then columns is as fast
    but leaves a non-contiguous array)."""

    def __init__(self, in_height: int, in_width: int, height: int, width: int):
        rows, cols = nearest_indices(in_height, height), nearest_indices(in_width, width)
        self.flat = (rows[:, None] * in_width + cols[None, :]).ravel()
        self.shape = (height, width)

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        c = frame.shape[0]
        return np.take(frame.reshape(c, -1), self.flat, axis=1).reshape(c, *self.shape)


def check_resize(resize) -> None:
    """env.resize: null, or [width, height] of two integers >= 1."""
    if resize is None:
        return
    values = None if isinstance(resize, str) or not hasattr(resize, "__len__") else list(resize)  # list, ListConfig
    if (values is None or len(values) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1 for v in values)):
        raise ConfigError("env.resize", resize, "null or [width, height], two integers >= 1 (e.g. [128, 72])")
