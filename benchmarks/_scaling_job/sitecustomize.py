"""Pins every Python process of a benchmark job to one core chosen by its host name (benchmarks/scaling.py).

Python imports `sitecustomize` at start-up from the path, so with this folder on PYTHONPATH each process of the
job (the learner rank, its rollout workers and their env processes, which inherit the affinity) is pinned before
it runs a line of sf_hydra: `SF_BENCH_PIN="sfn1:0,sfn2:1"` puts host sfn1's processes on CPU 0 and sfn2's on
CPU 1. Slurm's task/none plugin ignores `srun --cpu-bind`, and a Slurm task is started by the node's slurmd, not
by a command we could prefix with `taskset`: this is the one place the job's processes all pass through. A host
not in the map (the sweep process on the login node) is left alone; without the variable nothing happens.
"""

import os
import socket


def _pin_by_host(spec: str) -> None:
    """Sets this process's CPU affinity to the core `spec` ("host:core,host:core") names for this host."""
    cores = dict(item.split(":") for item in spec.split(",") if ":" in item)
    core = cores.get(socket.gethostname())
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(core)})


if os.environ.get("SF_BENCH_PIN"):
    _pin_by_host(os.environ["SF_BENCH_PIN"])
