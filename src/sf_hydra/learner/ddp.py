"""Data-parallel training (hardware.devices x hardware.num_nodes > 1 learner ranks), the learner's side.

Invariant: every rank holds the same learner state after every learner step (weights, normalizer statistics,
optimizer state, learning rates, versions, counters, statistics windows). It holds because every rank starts
from rank 0's weights (AllReduceDDP broadcasts them) and then changes its state only by what all ranks reduced
together, in the same order: the averaged gradient of each minibatch (with the loss statistics the learning
rate schedules read, which ride in its last gradient bucket: GradientSync), the moments its advantages are
normalized with (every rank's share of each minibatch of the step, one reduction: moments), the merged moments
of the normalizers (models/normalizer.py), the run's env steps, episodes and step statistics (every rank's, in
rank order), and the stop and checkpoint decisions. Each rank's own batches, its sampler and its worker seeds
differ.

No pickle crosses the ranks (they may be other machines): numbers travel as float64/int64 tensors, anything
else as JSON text in a uint8 tensor, decoded and checked on receipt (gather).

Every collective here runs with the process group's timeout (hardware.ddp_timeout_sec): a rank that died or
hangs ends the others' wait with an error instead of a hang.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import timedelta
from typing import Iterator, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from lightning.pytorch.strategies import DDPStrategy
from torch.nn.parallel import DistributedDataParallel

# Gradient megabytes per bucket: a bucket's all-reduce starts as soon as the backward pass has produced its
# gradients, so the later layers' reduction overlaps the earlier layers' backward computation. Each bucket pays
# the link's latency once: a few per model (Doom's encoder: a handful, CartPole's MLP: one); measured choice in
# docs/results.md (torch's default, 25, sized for GPUs, makes Doom's gradients one bucket and nothing overlaps).
BUCKET_MB = 4.0
# JSON bytes of each rank's value that the first all-gather of `gather` carries; a longer value takes a second.
SLOT_BYTES = 2048
_HEADER = 8  # an int64: the value's length in bytes


class AllReduceDDP(DDPStrategy):
    """Lightning's DDP strategy (process group, cluster environment: local variables or Slurm's, gloo on CPU,
    nccl on CUDA) without DistributedDataParallel's wrapper around the LightningModule: its training_step runs
    many backward passes (epochs x minibatches x micro-batches) and trains one of several policies, which a
    wrapper of the whole module cannot follow. Each policy's learner forward is wrapped instead (GradientSync).
    Weights and buffers are rank 0's when training starts."""

    def teardown(self) -> None:
        """Lightning's teardown, then the process group is destroyed: a later run in this process (a test's, a
        sweep's) starts from no group, and the final checkpoint after fit needs no collective (rank 0 writes)."""
        super().teardown()
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()

    def configure_ddp(self) -> None:
        with torch.no_grad():
            for tensor in [*self.model.parameters(), *self.model.buffers()]:
                dist.broadcast(tensor, 0)


def world_size() -> int:
    """The number of learner ranks (1 when the run is not data-parallel)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if world_size() > 1 else 0


class ReductionFailed(RuntimeError):
    """A minibatch's gradient all-reduce failed (its message says why: another rank's connection closed, or the
    process group's timeout passed): what another rank's end looks like on this one. DDP's reducer reports it
    from inside the backward pass, where no torch.distributed frame shows, so it is named by this type."""


class _LearnerForward(torch.nn.Module):
    """A policy's learner forward pass (`evaluate`) as a module's forward, the shape DistributedDataParallel
    wraps."""

    def __init__(self, policy: torch.nn.Module):
        super().__init__()
        self.policy = policy

    def forward(self, *args, **kwargs):
        return self.policy.evaluate(*args, **kwargs)


class GradientSync:
    """One policy's gradients averaged over the learner ranks while its backward passes run, by torch's
    DistributedDataParallel reducer: gradients are grouped in buckets of BUCKET_MB, each bucket all-reduced
    (asynchronously) as soon as its gradients are ready, so the reduction overlaps the rest of the backward
    pass. A minibatch's several backward passes (micro-batches, recurrence chunks) accumulate locally
    (`accumulating`: DDP's no_sync) and only the last one reduces. The minibatch's loss statistics ride in
    the same all-reduce as its last bucket (`carry`, `carried`): no collective of their own.

    One rank: the policy's own evaluate, no reduction. A missing gradient counts as zeros only where a
    parameter is unused on every rank; the learner's forward uses all of a policy's parameters."""

    def __init__(self, policy: torch.nn.Module):
        self.policy = policy
        self.ranks = world_size()
        self.wrapped: Optional[DistributedDataParallel] = None
        self._scalars: Optional[torch.Tensor] = None
        self._failure: Optional[BaseException] = None  # the last bucket all-reduce's error, if it failed
        if self.ranks > 1:  # the weights are rank 0's already (AllReduceDDP.configure_ddp): no second broadcast
            self.wrapped = DistributedDataParallel(_LearnerForward(policy), forward_sync_buffers=False,
                                                   bucket_cap_mb=BUCKET_MB, init_sync=False)
            self.wrapped.register_comm_hook(None, self._all_reduce_bucket)

    def evaluate(self, *args, **kwargs):
        """The policy's learner forward; its backward pass reduces the gradients unless `accumulating`."""
        return (self.wrapped or self.policy.evaluate)(*args, **kwargs)

    @contextmanager
    def accumulating(self, last: bool) -> Iterator[None]:
        """The context of one forward and backward pass of a minibatch: all but its `last` keep their
        gradients local (summed into `.grad`), the last one's backward averages the sum over the ranks; its
        all-reduce's failure raises ReductionFailed."""
        if self.wrapped is None:
            yield
        elif not last:
            with self.wrapped.no_sync():
                yield
        else:
            self._failure = None
            try:
                yield
            except RuntimeError as e:
                if self._failure is None:
                    raise
                raise ReductionFailed(f"the all-reduce of a minibatch's gradients failed: {self._failure}") from e

    def carry(self, scalars: torch.Tensor) -> None:
        """The minibatch's statistics (a 1-d float tensor), averaged over the ranks with its last bucket; call
        it before the last backward pass."""
        self._scalars = scalars

    def carried(self) -> torch.Tensor:
        """The carried statistics, every rank's average after the last backward pass (one rank: as given)."""
        scalars, self._scalars = self._scalars, None
        return scalars

    def _all_reduce_bucket(self, _state, bucket):
        """A bucket's gradients (a dist.GradBucket; the last one with the carried statistics appended) summed
        over the ranks, each rank's share divided by the number of ranks first: the average, the same on every
        rank. Returns the future of the reduced gradients. (No annotations: DDP compares them with its types,
        which this module's postponed annotations are not.)"""
        grads = bucket.buffer()
        with_scalars = bucket.is_last() and self._scalars is not None
        flat = torch.cat([grads, self._scalars.to(grads.dtype)]) if with_scalars else grads
        flat.div_(self.ranks)
        future = dist.all_reduce(flat, async_op=True).get_future()

        def unpack(done: torch.futures.Future) -> torch.Tensor:
            try:
                reduced = done.value()[0]
            except Exception as e:
                self._failure = e
                raise
            if with_scalars:
                self._scalars = reduced[grads.numel():]
                return reduced[:grads.numel()]
            return reduced

        return future.then(unpack)


def moments(pieces: Sequence[torch.Tensor]) -> List[Tuple[int, torch.Tensor, torch.Tensor]]:
    """(count, mean, standard deviation with Bessel's correction) of each of `pieces`, each together with
    every other rank's piece of the same index (one all-reduce of every piece's count, sum and sum of squares,
    in float64): a minibatch split over the ranks is normalized as one, and one reduction serves every
    minibatch of a learner step. One rank: each piece's own, as torch computes them."""
    if world_size() == 1:
        return [(p.numel(), p.mean(), p.std()) for p in pieces]
    if not pieces:
        return []
    flats = [p.reshape(-1).double() for p in pieces]
    device = flats[0].device
    totals = torch.stack([torch.stack([torch.tensor(float(f.numel()), dtype=torch.float64, device=device),
                                       f.sum(), (f * f).sum()]) for f in flats])
    dist.all_reduce(totals)
    out = []
    for piece, (count, total, total_sq) in zip(pieces, totals):
        n = int(count.item())
        mean = total / max(n, 1)
        var = (total_sq - n * mean * mean) / max(n - 1, 1)
        out.append((n, mean.to(piece.dtype), var.clamp(min=0.0).sqrt().to(piece.dtype)))
    return out


def _collective_device() -> torch.device:
    """Where the process group's tensors live: the current CUDA device for nccl, else the host."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _slots(payload: bytes, size: int, device: torch.device) -> torch.Tensor:
    """[_HEADER + size] uint8: the payload's length (int64), then its first `size` bytes, zero-padded."""
    slot = torch.zeros(_HEADER + size, dtype=torch.uint8)
    slot[:_HEADER] = torch.tensor([len(payload)], dtype=torch.int64).view(torch.uint8)
    head = payload[:size]
    if head:
        slot[_HEADER:_HEADER + len(head)] = torch.frombuffer(bytearray(head), dtype=torch.uint8)
    return slot.to(device)


def _all_gather(slot: torch.Tensor) -> List[torch.Tensor]:
    everyone = [torch.empty_like(slot) for _ in range(world_size())]
    dist.all_gather(everyone, slot)
    return [t.cpu() for t in everyone]


def gather(value) -> List:
    """Every rank's `value` (JSON data: numbers, strings, booleans, None, lists, dicts with string keys; a tuple
    comes back as a list), in rank order; one rank: [value]. Each value travels as JSON text in a uint8
    tensor (no pickle: a rank may be another machine): one all-gather of SLOT_BYTES per rank, a second only
    when some rank's text is longer. What arrives is checked: a length out of range or text that is not JSON
    raises, naming the rank."""
    if world_size() == 1:
        return [value]
    payload = json.dumps(value, separators=(",", ":"), allow_nan=True).encode()
    device = _collective_device()
    first = _all_gather(_slots(payload, SLOT_BYTES, device))
    lengths = [int(t[:_HEADER].view(torch.int64)) for t in first]
    longest = max(lengths)
    if longest > SLOT_BYTES:
        first = _all_gather(_slots(payload, longest, device))
    return [_decoded(r, t, n) for r, (t, n) in enumerate(zip(first, lengths))]


def _decoded(rank_: int, slot: torch.Tensor, length: int):
    """The JSON value of rank `rank_`'s slot, whose header says `length` bytes."""
    if not 0 <= length <= slot.numel() - _HEADER:
        raise ValueError(f"learner rank {rank_} sent a value of {length} bytes in a slot of "
                         f"{slot.numel() - _HEADER}: not a gather of this version")
    text = slot[_HEADER:_HEADER + length].numpy().tobytes()
    try:
        return json.loads(text.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"learner rank {rank_} sent a value that is not JSON ({e})") from None


def first_reason(reasons: Sequence[Optional[str]]) -> Optional[str]:
    """The first rank's reason to stop, named by its rank when it is not rank 0's; None when no rank has one."""
    for r, reason in enumerate(reasons):
        if reason is not None:
            return reason if r == 0 else f"learner rank {r}: {reason}"
    return None


def data_parallel_strategy(timeout_sec: float, launcher: str) -> AllReduceDDP:
    """The strategy of a data-parallel run, whose ranks Lightning reads from the variables of their `launcher`:
    "slurm" (Slurm's task variables; Slurm's requeue is the launcher's, not Lightning's), "torchrun" (torchrun's:
    RANK, LOCAL_RANK, GROUP_RANK, WORLD_SIZE; the process group exists already and is joined as it is), else
    "local" (those rank 0 set: sf_hydra.app.topology.local); every collective gives up after `timeout_sec`."""
    from lightning.pytorch.plugins.environments import LightningEnvironment, SLURMEnvironment, TorchElasticEnvironment

    environments = {"slurm": lambda: SLURMEnvironment(auto_requeue=False), "torchrun": TorchElasticEnvironment,
                    "local": LightningEnvironment}
    return AllReduceDDP(cluster_environment=environments[launcher](), timeout=timedelta(seconds=timeout_sec))
