"""Rendered frame -> observation: channel-first uint8, downsampled by an integer factor.

Downsampling keeps every `factor`-th pixel (stride pooling, i.e. nearest neighbour).
Measured on a 3x144x256 frame: 11 us, against 100 us for a 2x2 block mean computed in
uint16 and ~1 ms for a float mean; one basic step with frameskip 4 costs ~390 us, so the
block mean would cost ~25% of the env's throughput for little gain at factor 2.
"""

from __future__ import annotations

import numpy as np


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
