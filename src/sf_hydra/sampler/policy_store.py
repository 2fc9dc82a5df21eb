"""Publishes the learner's weights (parameters + normalizer buffers) to the rollout
workers through one flat shared tensor, a version counter and a sequence counter."""

from __future__ import annotations

import time

import torch
from torch import nn


def _tensors(model: nn.Module):
    return [t for t in model.state_dict(keep_vars=True).values()]


def flat_size(model: nn.Module) -> int:
    return sum(t.numel() for t in _tensors(model))


class PolicyStore:
    """Writer side is the learner, reader side each rollout worker. No lock is shared: a worker
    killed while it held one would leave the learner waiting forever. Instead a sequence
    counter (a seqlock): the writer makes it odd, writes, makes it even; a reader copies the
    weights and keeps them only if the counter was even and unchanged around its copy, else
    copies again. The writer never waits for a reader, and a dead reader holds nothing."""

    def __init__(self, model: nn.Module, shaping_size: int = 0):
        """shaping_size: 2 x the env's shaped quantities (envs/episode_info.py SHAPING_UNITS)."""
        self.flat = torch.zeros(flat_size(model), dtype=torch.float64).share_memory_()
        self.version = torch.zeros(1, dtype=torch.int64).share_memory_()
        self.sequence = torch.zeros(1, dtype=torch.int64).share_memory_()  # odd while being written
        # The policy's own reward-shaping weights minus the env's (PBT perturbs them): what a
        # worker adds per unit the env reports, for the rows this policy acts in. 0: the env's.
        self.reward_shaping = torch.zeros(shaping_size, dtype=torch.float64).share_memory_()
        self.publish(model, version=0)

    def set_reward_shaping(self, difference) -> None:
        self.reward_shaping.copy_(torch.as_tensor(difference, dtype=torch.float64))

    def publish(self, model: nn.Module, version: int) -> None:
        with torch.no_grad():
            self.sequence[0] += 1  # odd: a reader that overlaps this copies again
            offset = 0
            for t in _tensors(model):
                n = t.numel()
                self.flat[offset : offset + n].copy_(t.detach().reshape(-1))
                offset += n
            self.version[0] = version
            self.sequence[0] += 1

    def load_into(self, model: nn.Module, patience: float = 30.0) -> int:
        """Copies the latest whole weights into `model`; returns their version. A torn copy is
        retried after a pause that grows (up to 10 ms), so a writer publishing back to back still
        leaves a reader a window; only `patience` seconds without one whole copy is an error."""
        deadline, pause = time.monotonic() + patience, 0.0001
        with torch.no_grad():
            while True:
                before = int(self.sequence[0])
                if before % 2 == 0:
                    offset = 0
                    for t in _tensors(model):
                        n = t.numel()
                        t.data.copy_(self.flat[offset : offset + n].reshape(t.shape))
                        offset += n
                    version = int(self.version[0])
                    if int(self.sequence[0]) == before:
                        return version
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the policy store was being written through {patience:.0f} s of reads: "
                                       "is the learner stuck in the middle of publishing its weights?")
                time.sleep(pause)
                pause = min(2 * pause, 0.01)

    def current_version(self) -> int:
        return int(self.version[0])
