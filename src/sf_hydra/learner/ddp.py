"""Data-parallel training (hardware.devices x hardware.num_nodes > 1 learner ranks), the learner's side.

Invariant: every rank holds the same learner state after every learner step (weights, normalizer statistics,
optimizer state, learning rates, versions, counters, statistics windows). It holds because every rank starts
from rank 0's weights (AllReduceDDP broadcasts them) and then changes its state only by what all ranks reduced
together, in the same order: the averaged gradient of each minibatch (with the loss statistics the learning
rate schedules read), the moments its advantages are normalized with (every rank's share of the minibatch),
the merged moments of the normalizers (models/normalizer.py), the run's env steps, episodes and step statistics
(every rank's, in rank order), and the stop and checkpoint decisions. Each rank's own batches, its
sampler and its worker seeds differ.

Every collective here runs with the process group's timeout (hardware.ddp_timeout_sec): a rank that died or
hangs ends the others' wait with an error instead of a hang.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from lightning.pytorch.strategies import DDPStrategy


class AllReduceDDP(DDPStrategy):
    """Lightning's DDP strategy (process group, cluster environment: local variables or Slurm's, gloo on CPU,
    nccl on CUDA) without DistributedDataParallel's wrapper: the learner runs many backward passes per
    training_step (epochs x minibatches x micro-batches), which the wrapper's reducer does not allow, and
    averages each minibatch's gradients itself (average_gradients). Weights and buffers are rank 0's when
    training starts."""

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


def average_gradients(parameters: Sequence[torch.nn.Parameter],
                      scalars: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Every rank's gradients of `parameters` averaged into each rank's `.grad` (a missing gradient counts as
    zeros), with `scalars` (the minibatch's losses, 0-d tensors) averaged alongside in the same all-reduce;
    returns the averaged scalars, 0-d tensors on the gradients' device. One rank: nothing to do."""
    n = world_size()
    if n == 1:
        return scalars
    params = list(parameters)
    device = params[0].device
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    names = sorted(scalars)
    flat = torch.cat([g.reshape(-1).float() for g in grads]
                     + [torch.stack([torch.as_tensor(scalars[k], device=device).float() for k in names])])
    dist.all_reduce(flat)
    flat /= n
    offset = 0
    for p, g in zip(params, grads):
        size = g.numel()
        averaged = flat[offset:offset + size].view_as(g).to(g.dtype)
        if p.grad is None:
            p.grad = averaged.clone()
        else:
            p.grad.copy_(averaged)
        offset += size
    return dict(zip(names, flat[offset:].unbind()))


def moments(values: torch.Tensor) -> Tuple[int, torch.Tensor, torch.Tensor]:
    """(count, mean, standard deviation with Bessel's correction) of `values` together with every other rank's
    `values` (one all-reduce of count, sum and sum of squares, in float64): a minibatch split over the ranks
    is normalized as one. One rank: `values`' own, as torch computes them."""
    if world_size() == 1:
        return values.numel(), values.mean(), values.std()
    flat = values.reshape(-1).double()
    total = torch.stack([torch.tensor(float(flat.numel()), dtype=torch.float64, device=flat.device), flat.sum(),
                         (flat * flat).sum()])
    dist.all_reduce(total)
    n = int(total[0].item())
    mean = total[1] / max(n, 1)
    var = (total[2] - n * mean * mean) / max(n - 1, 1)
    return n, mean.to(values.dtype), var.clamp(min=0.0).sqrt().to(values.dtype)


def gather(value) -> List:
    """Every rank's `value` (a small picklable object), in rank order; one rank: [value]."""
    if world_size() == 1:
        return [value]
    out: List = [None] * world_size()
    dist.all_gather_object(out, value)
    return out


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
