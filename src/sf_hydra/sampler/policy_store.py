"""Publishes the learner's weights (parameters + normalizer buffers) to the rollout workers and
inference servers through one flat tensor, a version counter and a sequence counter. The flat
tensor is in shared host memory; with a CUDA learner and CUDA inference servers the learner also
shares a flat tensor on its device (CUDA IPC) and publishes there, device to device."""

from __future__ import annotations

import time
from typing import Optional

import torch
from torch import nn

HOST, DEVICE = 0, 1  # where the latest weights are (PolicyStore.location)


def _tensors(model: nn.Module):
    return [t for t in model.state_dict(keep_vars=True).values()]


def flat_size(model: nn.Module) -> int:
    return sum(t.numel() for t in _tensors(model))


class PolicyStore:
    """Writer side is the learner, reader side each rollout worker or inference server. No lock is
    shared: a worker killed while it held one would leave the learner waiting forever. Instead a
    sequence counter (a seqlock): the writer makes it odd, writes, makes it even; a reader copies
    the weights and keeps them only if the counter was even and unchanged around its copy, else
    copies again. The writer never waits for a reader, and a dead reader holds nothing.

    Invariant: `location` names the flat tensor that holds version `version` whole (HOST: `flat`;
    DEVICE: `device_flat`, which only the learner and the inference servers hold). A device write
    is finished (synchronized) before the sequence counter turns even."""

    def __init__(self, model: nn.Module, shaping_size: int = 0, odds_size: int = 0):
        """shaping_size: 2 x the env's shaped quantities (envs/episode_info.py SHAPING_UNITS).
        odds_size: an opponent pool slot's store: the number of trained policies (see `odds`)."""
        self.flat = torch.zeros(flat_size(model), dtype=torch.float64).share_memory_()
        self.version = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._version_view = None  # numpy view of `version`, made in each process that reads it (current_version)
        self.sequence = torch.zeros(1, dtype=torch.int64).share_memory_()  # odd while being written
        self.location = torch.zeros(1, dtype=torch.int64).share_memory_()  # HOST or DEVICE
        # The policy's own reward-shaping weights minus the env's (PBT perturbs them): what a
        # worker adds per unit the env reports, for the rows this policy acts in. 0: the env's.
        self.reward_shaping = torch.zeros(shaping_size, dtype=torch.float64).share_memory_()
        # An opponent pool slot: per trained policy, the weight of drawing this slot as its opponent
        # (selfplay.opponent_sampling; set by the learner, read by the workers when they seat a game).
        self.odds = torch.ones(odds_size, dtype=torch.float64).share_memory_()
        self.device_flat: Optional[torch.Tensor] = None  # see share_on_device / adopt_device_flat
        self.publish(model, version=0)

    def __getstate__(self):  # the device tensor comes only by a message (adopt_device_flat); a view is per process
        return {**self.__dict__, "device_flat": None, "_version_view": None}

    def set_reward_shaping(self, difference) -> None:
        self.reward_shaping.copy_(torch.as_tensor(difference, dtype=torch.float64))

    # -- the learner's side --------------------------------------------------------------------
    def share_on_device(self, device: torch.device) -> torch.Tensor:
        """The learner's flat tensor on `device`, allocated once: every later `publish` of a model
        on that device writes there instead of host memory. Send it to each reader by message (on
        CUDA, torch shares it by IPC handle), before the next publish."""
        if self.device_flat is None:
            self.device_flat = torch.zeros(self.flat.numel(), dtype=torch.float64, device=device)
        return self.device_flat

    def publish(self, model: nn.Module, version: int) -> None:
        tensors = _tensors(model)
        device = tensors[0].device if tensors else torch.device("cpu")
        on_device = self.device_flat is not None and self.device_flat.device == device
        target = self.device_flat if on_device else self.flat
        with torch.no_grad():
            self.sequence[0] += 1  # odd: a reader that overlaps this copies again
            offset = 0
            for t in tensors:
                n = t.numel()
                target[offset : offset + n].copy_(t.detach().reshape(-1))
                offset += n
            _finish_copies(target)
            self.location[0] = DEVICE if on_device else HOST
            self.version[0] = version
            self.sequence[0] += 1

    # -- the readers' side ---------------------------------------------------------------------
    def adopt_device_flat(self, device_flat: torch.Tensor) -> None:
        """A reader (inference server) takes the learner's device tensor, received by message."""
        self.device_flat = device_flat

    def needs_device_flat(self) -> bool:
        """The latest weights are on the learner's device, and this reader has not got its tensor yet."""
        return int(self.location[0]) == DEVICE and self.device_flat is None

    def load_into(self, model: nn.Module, patience: float = 30.0) -> int:
        """Copies the latest whole weights into `model` (on any device); returns their version. A torn
        copy is retried after a pause that grows (up to 10 ms), so a writer publishing back to back
        still leaves a reader a window; only `patience` seconds without one whole copy is an error."""
        deadline, pause = time.monotonic() + patience, 0.0001
        tensors = _tensors(model)
        with torch.no_grad():
            while True:
                before = int(self.sequence[0])
                if before % 2 == 0:
                    source = self._source()
                    offset = 0
                    for t in tensors:
                        n = t.numel()
                        t.data.copy_(source[offset : offset + n].reshape(t.shape))
                        offset += n
                    _finish_copies(source, *tensors[:1])
                    version = int(self.version[0])
                    if int(self.sequence[0]) == before:
                        return version
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the policy store was being written through {patience:.0f} s of reads: "
                                       "is the learner stuck in the middle of publishing its weights?")
                time.sleep(pause)
                pause = min(2 * pause, 0.01)

    def _source(self) -> torch.Tensor:
        if int(self.location[0]) == HOST:
            return self.flat
        if self.device_flat is None:
            raise RuntimeError("the learner publishes this policy's weights on its device, and this process "
                               "was not given that tensor (only inference servers on the learner's device are)")
        return self.device_flat

    def current_version(self) -> int:
        """The published version, read through a numpy view of the shared counter (made once per
        process; a view, so it sees every publish): 0.1 us, against 1.5 us for a tensor item read,
        once per env step and policy in every worker."""
        view = self._version_view
        if view is None:
            view = self._version_view = self.version.numpy()
        return int(view[0])


def _finish_copies(*tensors: torch.Tensor) -> None:
    """Waits for the copies queued on the CUDA devices of `tensors` (a no-op on the CPU)."""
    for device in {t.device for t in tensors if t.is_cuda}:
        torch.cuda.synchronize(device)
