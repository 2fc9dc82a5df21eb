"""A callback that times every torch.distributed collective of a learner rank per learner step, for
benchmarks/scaling.py (`+callbacks.collective_probe._target_=collective_probe.CollectiveProbe` with this folder
on PYTHONPATH). Opt-in: a run without it is untouched.

While training runs, `torch.distributed.all_reduce`, `all_gather`, `all_gather_object` and `broadcast` are
wrapped (sf_hydra's learner/ddp.py and models/normalizer.py call them through the module, so they pass the
wrappers): each call adds its count, its bytes and its wall seconds to the current step's record. A collective's
seconds include waiting for the slowest rank to arrive: the time this rank's learner spends in collectives, not
the wire's cost alone (the script's raw all-reduce gives that).
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import time
from pathlib import Path
from typing import Callable, Dict, List

import lightning as L
import psutil
import torch
import torch.distributed as dist

KINDS = ("all_reduce", "all_gather", "all_gather_object", "broadcast")


def _payload_bytes(kind: str, args, kwargs) -> int:
    """The bytes this rank contributes to one call: the tensor's (all_reduce, broadcast, all_gather's input) or
    the pickled object's (all_gather_object); positional or keyword arguments as torch.distributed names them."""
    if kind == "all_gather_object":
        obj = args[1] if len(args) > 1 else kwargs.get("obj")
        return len(pickle.dumps(obj))
    if kind == "all_gather":
        tensor = args[1] if len(args) > 1 else kwargs.get("tensor")
    else:
        tensor = args[0] if args else kwargs.get("tensor")
    return tensor.numel() * tensor.element_size() if isinstance(tensor, torch.Tensor) else 0


class CollectiveProbe(L.Callback):
    """Writes `<directory>/collectives_rank_<global rank>.json` at the end of training: the host, this process's
    cores and its children's (the pinning's evidence), the model's trainable numbers, and per learner step its
    seconds (batch start to batch end: the update and the callbacks' step ends), its cycle (batch start to the
    next batch start: waiting for data included) and per collective kind [calls, bytes, seconds], a tensor
collective's kind named with its size ("all_reduce 18712 B": the gradients apart from the small reductions)."""

    def __init__(self, directory: str):
        self.directory = Path(directory)
        self.steps: List[dict] = []
        self._current: Dict[str, List[float]] = {}
        self._originals: Dict[str, Callable] = {}
        self._start = None
        self._info: dict = {}

    def _wrap(self, kind: str, fn: Callable) -> Callable:
        """fn, adding each call's count, bytes and wall seconds to the current step's record."""
        def timed(*args, **kwargs):
            size = _payload_bytes(kind, args, kwargs)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                key = kind if kind == "all_gather_object" else f"{kind} {size} B"  # gradients apart from scalars
                record = self._current.setdefault(key, [0, 0, 0.0])
                record[0] += 1
                record[1] += size
                record[2] += time.perf_counter() - start
        return timed

    def on_train_start(self, trainer, pl_module):
        for kind in KINDS:
            self._originals[kind] = getattr(dist, kind)
            setattr(dist, kind, self._wrap(kind, self._originals[kind]))
        me = psutil.Process()
        children = [{"pid": c.pid, "name": c.name(), "cores": c.cpu_affinity()} for c in me.children(recursive=True)
                    if c.is_running()]
        self._info = {"hostname": socket.gethostname(), "cores": sorted(os.sched_getaffinity(0)),
                      "children": children, "world_size": trainer.world_size, "rank": trainer.global_rank,
                      "trainable_numbers": sum(p.numel() for p in pl_module.parameters() if p.requires_grad),
                      "torch_threads": torch.get_num_threads()}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.perf_counter()
        if self._start is not None and self.steps:
            self.steps[-1]["cycle_s"] = now - self._start
        self._start = now
        self._current = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.steps.append({"step_s": time.perf_counter() - self._start, "collectives": self._current})

    def on_train_end(self, trainer, pl_module):
        for kind, fn in self._originals.items():
            setattr(dist, kind, fn)
        self._originals = {}
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"collectives_rank_{trainer.global_rank}.json"
        path.write_text(json.dumps({**self._info, "steps": self.steps}))
