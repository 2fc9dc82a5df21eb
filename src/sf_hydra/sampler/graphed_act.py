"""Acting on fixed shapes, for an inference server on CUDA (hardware.inference_cuda_graphs).

A server's batches vary in rows: the splits that happen to be waiting. Its forward on a GPU is a few
dozen small kernels, and launching them costs more than their arithmetic at these sizes. A CUDA graph
records the kernels once and replays them with one launch, but only on the memory it recorded: the
same input and output tensors on every replay.

`BucketedAct` gives each bucket of rows (powers of two up to the server's rows, and the server's rows
themselves) its own input buffers and its own recorded step. A call of n rows copies its inputs into
the first n rows of the smallest bucket >= n, replays that bucket's step and returns the first n rows
of its outputs. Rows n.. hold an earlier call's inputs; their outputs are computed and dropped.

Invariants:
- a row's output is its own input's: the policy acts row by row (no batch statistics in acting), so
  the padding rows change nothing in the first n;
- a bucket's input buffers and its step's outputs are the same tensors on every call (what a graph
  replays), and the weights are read where they live: PolicyStore.load_into copies new weights into
  the parameters in place, so a replay acts with the newest weights with nothing re-recorded;
- the returned outputs are views of the bucket's output buffers, valid until the next call of that
  bucket (the server copies them to the workers' shared memory before its next batch).

Only single-policy batches go through the buckets (`policies` None): several policies' rows are
split by policy, a shape that depends on the data. Where recording fails (an op a graph cannot hold),
the server says so once in its log and acts eagerly from then on.

`capture` is the recording strategy: `record_cuda_graph` on CUDA, `run_eagerly` elsewhere (the same
buffers and buckets, the step run each call: what the CPU tests exercise).
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional

import torch

from sf_hydra.models.actor_critic import StepOutput

log = logging.getLogger(__name__)

Step = Callable[[], StepOutput]

WARMUP_CALLS = 3  # eager calls on a side stream before recording (lazy inits, cuDNN's algorithm choice)


def bucket_sizes(max_rows: int) -> List[int]:
    """The row counts a call is padded to: 1, 2, 4, ... below `max_rows`, then `max_rows`."""
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")
    sizes, b = [], 1
    while b < max_rows:
        sizes.append(b)
        b *= 2
    return sizes + [max_rows]


def run_eagerly(step: Step) -> Step:
    """No recording: each call runs `step` on the bucket's buffers."""
    return step


def record_cuda_graph(step: Step) -> Step:
    """Records `step` as a CUDA graph, after WARMUP_CALLS eager calls on a side stream (as torch's
    docs ask); returns a function that replays it and returns the recorded output tensors."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()

    def replay() -> StepOutput:
        graph.replay()
        return out
    return replay


def _rows(out: StepOutput, n: int) -> StepOutput:
    return StepOutput(out.actions[:n], out.log_probs[:n], out.values[:n],
                      None if out.rnn_states is None else out.rnn_states[:n],
                      None if out.extras is None else {k: v[:n] for k, v in out.extras.items()})


class _Bucket:
    """One row count's input buffers and its recorded step."""

    def __init__(self, act, rows: int, obs_like: Dict[str, torch.Tensor], rnn_like: Optional[torch.Tensor],
                 capture):
        self.rows = rows
        self.obs = {k: torch.zeros((rows, *v.shape[1:]), dtype=v.dtype, device=v.device) for k, v in obs_like.items()}
        self.rnn = None if rnn_like is None else torch.zeros((rows, *rnn_like.shape[1:]), dtype=rnn_like.dtype,
                                                             device=rnn_like.device)
        self.run = capture(lambda: act(self.obs, self.rnn, None))

    def __call__(self, obs: Dict[str, torch.Tensor], rnn: Optional[torch.Tensor]) -> StepOutput:
        n = len(next(iter(obs.values())))
        for k, buf in self.obs.items():
            buf[:n].copy_(obs[k], non_blocking=True)
        if self.rnn is not None:
            self.rnn[:n].copy_(rnn, non_blocking=True)
        return _rows(self.run(), n)


class BucketedAct:
    """`act(obs, rnn, policies)` with the same outputs as the wrapped `act` (see the module's
    invariants), single-policy calls of at most `max_rows` rows run on fixed shapes."""

    def __init__(self, act, max_rows: int, capture=run_eagerly):
        self.act, self.capture = act, capture
        self.sizes = bucket_sizes(max_rows)
        self.buckets: Dict[int, _Bucket] = {}
        self.failed: Optional[str] = None  # why recording failed; then every call acts eagerly
        self.calls_on_buckets, self.eager_calls = 0, 0

    def __call__(self, obs: Dict[str, torch.Tensor], rnn: Optional[torch.Tensor], policies) -> StepOutput:
        n = len(next(iter(obs.values())))
        if policies is not None or self.failed is not None or n > self.sizes[-1]:
            self.eager_calls += 1
            return self.act(obs, rnn, policies)
        size = next(b for b in self.sizes if b >= n)
        bucket = self.buckets.get(size)
        if bucket is None:
            try:
                bucket = self.buckets[size] = _Bucket(self.act, size, obs, rnn, self.capture)
            except Exception as e:  # an op the recording cannot hold: act eagerly from now on, and say so once
                self.failed = f"{type(e).__name__}: {e}"
                log.warning("inference server: recording the policy step for %d rows failed (%s); acting without "
                            "CUDA graphs from now on (hardware.inference_cuda_graphs)", size, self.failed)
                self.eager_calls += 1
                return self.act(obs, rnn, policies)
        self.calls_on_buckets += 1
        return bucket(obs, rnn)
