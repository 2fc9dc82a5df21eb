"""The process context for the sampler: `multiprocess` with spawn, taught to share torch
tensors by handle (its own pickler does not know torch and would copy them)."""

from __future__ import annotations

import multiprocess
import multiprocess.reduction as mp_reduction
import torch
import torch.multiprocessing.reductions as torch_reductions
from torch.nn.parameter import Parameter

_registered = False


def register_torch_reducers() -> None:
    global _registered
    if _registered:
        return
    torch.multiprocessing.set_sharing_strategy("file_system")
    register = mp_reduction.ForkingPickler.register
    for storage_cls in torch._storage_classes:
        if storage_cls.__name__ == "UntypedStorage":
            register(storage_cls, torch_reductions.reduce_storage)
        else:
            register(storage_cls, torch_reductions.reduce_typed_storage_child)
    register(torch.storage.TypedStorage, torch_reductions.reduce_typed_storage)
    for tensor_cls in (*torch._tensor_classes, torch.Tensor, Parameter):
        register(tensor_cls, torch_reductions.reduce_tensor)
    _registered = True


def context():
    register_torch_reducers()
    return multiprocess.get_context("spawn")
