"""A callback that times every torch.distributed collective of a learner rank per learner step, for
benchmarks/scaling.py (`+callbacks.collective_probe._target_=collective_probe.CollectiveProbe` with this folder
on PYTHONPATH). Opt-in: a run without it is untouched.

While training runs, `torch.distributed.all_reduce`, `all_gather`, `all_gather_object` and `broadcast` are
wrapped (sf_hydra's learner/ddp.py and models/normalizer.py call them through the module, so they pass the
wrappers): each call adds its count, its bytes and its wall seconds to the current step's record. A collective's
seconds include waiting for the slowest rank to arrive: the time this rank's learner spends in collectives, not
the wire's cost alone (the script's raw all-reduce gives that).

The gradient buckets that DDP's reducer all-reduces while a backward pass runs (learner/ddp.py GradientSync,
`async_op=True`) cost the learner only what the backward pass waits for after its computation ends: per
backward pass, from the launch of its last bucket (its gradients, the first layers', are the last computed) to
the end of the pass. That is the kind "gradient buckets (exposed)"; each bucket's own count and bytes are its
"all_reduce async <bytes> B" kind (0 s: the wait is in the exposed part), and the seconds the buckets were in
flight, overlapped with the backward computation or not, the step's `in_flight_s`.
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
            if kwargs.get("async_op"):
                return self._launched(kind, size, fn(*args, **kwargs))
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

    def _add(self, key: str, calls: int, size: int, seconds: float) -> None:
        record = self._current.setdefault(key, [0, 0, 0.0])
        record[0] += calls
        record[1] += size
        record[2] += seconds

    def _launched(self, kind: str, size: int, work):
        """An asynchronous collective (a gradient bucket): counted, its launch noted for the backward pass that
        waits for it, its time in flight added when it completes."""
        start = self._last_launch = time.perf_counter()
        self._add(f"{kind} async {size} B", 1, size, 0.0)
        current = self._current

        def done(future):
            current["in_flight_s"] = [0, 0, current.get("in_flight_s", [0, 0, 0.0])[2] + time.perf_counter() - start]
            return future.value()

        work.get_future().then(done)
        return work

    def _timed_backward(self, backward: Callable) -> Callable:
        """The learner's manual_backward, adding what it waited for its gradient buckets after the last launch."""
        def timed(*args, **kwargs):
            self._last_launch = None
            out = backward(*args, **kwargs)
            if self._last_launch is not None:
                self._add("gradient buckets (exposed)", 1, 0, time.perf_counter() - self._last_launch)
            return out
        return timed

    def on_train_start(self, trainer, pl_module):
        self._last_launch = None
        pl_module.manual_backward = self._timed_backward(pl_module.manual_backward)
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
        in_flight = self._current.pop("in_flight_s", [0, 0, 0.0])[2]
        self.steps.append({"step_s": time.perf_counter() - self._start, "collectives": self._current,
                           "in_flight_s": in_flight})

    def on_train_end(self, trainer, pl_module):
        del pl_module.manual_backward  # the class's again
        for kind, fn in self._originals.items():
            setattr(dist, kind, fn)
        self._originals = {}
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"collectives_rank_{trainer.global_rank}.json"
        path.write_text(json.dumps({**self._info, "steps": self.steps}))
