"""Publishes the learner's weights (parameters + normalizer buffers) to the rollout
workers through one flat shared tensor and a version counter."""

from __future__ import annotations

import torch
from torch import nn


def _tensors(model: nn.Module):
    return [t for t in model.state_dict(keep_vars=True).values()]


def flat_size(model: nn.Module) -> int:
    return sum(t.numel() for t in _tensors(model))


class PolicyStore:
    """Writer side is the learner, reader side each rollout worker; a lock keeps a reader
    from seeing half-written weights."""

    def __init__(self, model: nn.Module, lock, shaping_size: int = 0):
        """shaping_size: 2 x the env's shaped quantities (envs/episode_info.py SHAPING_UNITS)."""
        self.flat = torch.zeros(flat_size(model), dtype=torch.float64).share_memory_()
        self.version = torch.zeros(1, dtype=torch.int64).share_memory_()
        # The policy's own reward-shaping weights minus the env's (PBT perturbs them): what a
        # worker adds per unit the env reports, for the rows this policy acts in. 0: the env's.
        self.reward_shaping = torch.zeros(shaping_size, dtype=torch.float64).share_memory_()
        self.lock = lock
        self.publish(model, version=0)

    def set_reward_shaping(self, difference) -> None:
        self.reward_shaping.copy_(torch.as_tensor(difference, dtype=torch.float64))

    def publish(self, model: nn.Module, version: int) -> None:
        with torch.no_grad(), self.lock:
            offset = 0
            for t in _tensors(model):
                n = t.numel()
                self.flat[offset : offset + n].copy_(t.detach().reshape(-1))
                offset += n
            self.version[0] = version

    def load_into(self, model: nn.Module) -> int:
        """Copies the latest weights into `model`; returns their version."""
        with torch.no_grad(), self.lock:
            offset = 0
            for t in _tensors(model):
                n = t.numel()
                t.data.copy_(self.flat[offset : offset + n].reshape(t.shape))
                offset += n
            return int(self.version[0])

    def current_version(self) -> int:
        return int(self.version[0])
