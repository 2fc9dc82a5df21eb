"""`hydra/launcher=local_parallel`: several runs of a sweep at once on this machine.

Built on submitit's local executor (each run in its own process, logs under the sweep's
`.submitit/`), with what Sample Factory's runner did for one box: at most `max_parallel` runs
at a time, the CPU cores split between the running ones (each run is pinned to its share, and
its rollout workers inherit the pinning), and GPUs packed `experiments_per_gpu` runs to a device.
"""

# No `from __future__ import annotations` here: Hydra executes plugin modules before they are in
# sys.modules, and a dataclass with string annotations then cannot resolve its module.
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides

try:
    from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher
except ImportError:  # no `slurm` extra: no launcher (and no plugin warning at every start); the helpers stay
    LocalQueueConf = LocalLauncher = None

log = logging.getLogger(__name__)


@dataclass
class LocalParallelConf(LocalQueueConf or object):
    _target_: str = "hydra_plugins.sf_hydra_plugins.local_parallel.LocalParallelLauncher"
    max_parallel: int = 2  # runs at once
    experiments_per_gpu: int = 1  # runs sharing one GPU
    num_gpus: int = 0  # GPUs to spread runs over (0: none, CPU only)
    pin_cpus: bool = True  # give each running run its own share of the cores
    poll_sec: float = 0.5


def core_shares(cores: Sequence[int], parallel: int) -> List[List[int]]:
    """Splits the cores into `parallel` near-equal contiguous shares (each at least one core)."""
    cores = sorted(cores)
    if parallel >= len(cores):
        return [[cores[i % len(cores)]] for i in range(parallel)]
    size, extra = divmod(len(cores), parallel)
    shares, start = [], 0
    for i in range(parallel):
        end = start + size + (1 if i < extra else 0)
        shares.append(cores[start:end])
        start = end
    return shares


def gpu_for_slot(slot: int, experiments_per_gpu: int, num_gpus: int) -> Optional[int]:
    return None if num_gpus <= 0 else (slot // experiments_per_gpu) % num_gpus


class LocalParallelLauncher(LocalLauncher or object):
    def __init__(self, max_parallel: int = 2, experiments_per_gpu: int = 1, num_gpus: int = 0,
                 pin_cpus: bool = True, poll_sec: float = 0.5, **params: Any) -> None:
        from sf_hydra.core.errors import ConfigError  # a cycle: sf_hydra.config.store imports this module

        for key, value in (("max_parallel", max_parallel), ("experiments_per_gpu", experiments_per_gpu)):
            if value < 1:
                raise ConfigError(f"hydra.launcher.{key}", value, "an integer >= 1")
        if num_gpus < 0:
            raise ConfigError("hydra.launcher.num_gpus", num_gpus, "an integer >= 0")
        super().__init__(**params)
        self.max_parallel, self.experiments_per_gpu, self.num_gpus = max_parallel, experiments_per_gpu, num_gpus
        self.pin_cpus, self.poll_sec = pin_cpus, poll_sec

    def __call__(self, sweep_overrides, job_dir_key, job_num, job_id, singleton_state, cores=None) -> JobReturn:
        """Runs in the job's own process: pin to this run's cores, then run it as Hydra would."""
        if cores:
            os.sched_setaffinity(0, cores)
            # Logging is not set up yet in the job's process: this goes to its submitit log.
            print(f"run #{job_num} pinned to cores {sorted(os.sched_getaffinity(0))}", file=sys.stderr, flush=True)
        return super().__call__(sweep_overrides, job_dir_key, job_num, job_id, singleton_state)

    def _executor(self):
        import submitit  # Hydra imports every plugin at start: submitit only when this launcher runs

        executor = submitit.LocalExecutor(folder=self.params["submitit_folder"])
        executor.update_parameters(timeout_min=self.params["timeout_min"], tasks_per_node=1)
        return executor

    def _submit(self, executor, slot: int, idx: int, overrides: Sequence[str], shares: List[List[int]]):
        gpu = gpu_for_slot(slot, self.experiments_per_gpu, self.num_gpus)
        executor.update_parameters(gpus_per_node=0 if gpu is None else 1, visible_gpus=() if gpu is None else (gpu,))
        cores = shares[slot] if self.pin_cpus else None
        log.info("\t#%d : %s (cores %s%s)", idx, " ".join(filter_overrides(overrides)), cores or "all",
                 "" if gpu is None else f", GPU {gpu}")
        return executor.submit(self, list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}",
                               Singleton.get_state(), cores)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        parallel = min(self.max_parallel, len(job_overrides))
        shares = core_shares(sorted(os.sched_getaffinity(0)), parallel)
        log.info("local_parallel: %d runs, %d at a time, sweep folder %s", len(job_overrides), parallel, sweep_dir)
        executor = self._executor()
        pending = list(enumerate(job_overrides, start=initial_job_idx))
        running: Dict[int, tuple] = {}  # slot -> (idx, overrides, job)
        results: Dict[int, JobReturn] = {}
        while pending or running:
            for slot in range(parallel):
                if slot not in running and pending:
                    idx, overrides = pending.pop(0)
                    running[slot] = (idx, overrides, self._submit(executor, slot, idx, overrides, shares))
            time.sleep(self.poll_sec)
            for slot, (idx, overrides, job) in list(running.items()):
                if job.done():
                    results[idx] = self._collect(job, overrides)
                    del running[slot]
        return [results[i] for i in sorted(results)]

    @staticmethod
    def _collect(job, overrides) -> JobReturn:
        """A run whose process died (killed, crashed outside Hydra) becomes a failed result, so
        the other runs of the sweep go on and Hydra reports it at the end."""
        try:
            return job.results()[0]
        except Exception as e:  # submitit's FailedJobException carries the job's own traceback
            log.error("run %s (submitit job %s) failed: %s", " ".join(overrides), job.job_id,
                      str(e).splitlines()[0] if str(e) else e)
            return JobReturn(overrides=list(overrides), status=JobStatus.FAILED, _return_value=e)


if LocalLauncher is None:  # sf_hydra.config.store registers the launcher's node only when this import works
    del LocalParallelConf, LocalParallelLauncher
