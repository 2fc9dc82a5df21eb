"""The tasks of a Slurm job step, one per rank (`hydra/launcher=slurm` with hydra.launcher.tasks_per_node=<devices>
and hydra.launcher.nodes=<num_nodes>): submitit runs the Hydra task in every task, Lightning's SLURMEnvironment reads
the ranks from SLURM_PROCID and SLURM_LOCALID, and the task of rank 0 holds the run folder.

Slurm starts every task at once, before any process group exists: rank 0 writes its decision into the run folder
(sf_hydra.app.topology.folder) under the job step's name, which every task knows, and the others wait for it. Each
rank > 0 records where it runs and, when it fails, how (app/ranks.py record_rank): rank 0, which cannot see the
other nodes' processes, names the rank whose end broke a collective, and a lost node requeues the job
(sf_hydra.app.requeue)."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Iterator

from sf_hydra.app.ranks import log_to_rank_file, record_rank, record_start, recorded_rank_end, use_interface_to_peers
from sf_hydra.app.topology.base import Topology, from_a_collective, own_fault, timed_out
from sf_hydra.app.topology.folder import await_start, write_start
from sf_hydra.app.topology.start import RunStart
from sf_hydra.core.faults import NodeLost, RankFailed

log = logging.getLogger("sf_hydra")


class SlurmTasks(Topology):
    """Rank r is Slurm task r of the job step."""

    others_wait = True

    def session(self) -> str:
        """The job, its step and its requeue count: the same in every task, another at the next start."""
        env = os.environ
        return f"slurm-{env.get('SLURM_JOB_ID', '?')}.{env.get('SLURM_STEP_ID', '?')}." \
               f"{env.get('SLURM_RESTART_COUNT', '0')}"

    def hold(self, run_dir: Path):
        return super().hold(run_dir) if self.place.is_zero else self._recorded(run_dir)

    @contextlib.contextmanager
    def _recorded(self, run_dir: Path) -> Iterator[None]:
        """A rank > 0 logs to ranks/rank_<r>.log (its Hydra task would log into the run's train.log), records itself
        at once and, when it fails, how."""
        log_to_rank_file(run_dir, self.place.rank)
        record_start(run_dir, self.place, self.session())
        try:
            yield
        except BaseException as e:
            what = str(e).strip().splitlines()[0] if str(e).strip() else ""
            record_rank(run_dir, self.place, end=f"{type(e).__name__}: {what}"[:500], collective=from_a_collective(e))
            raise

    def hand_over(self, cfg, run_dir: Path, start: RunStart) -> None:
        write_start(run_dir, start)

    def receive(self, cfg, run_dir: Path) -> RunStart:
        return await_start(run_dir, self.session(), cfg.hardware.ddp_timeout_sec, f"learner rank {self.place.rank}")

    def strategy(self, cfg):
        from sf_hydra.learner.ddp import data_parallel_strategy

        network = use_interface_to_peers()
        if network is not None:  # ranks on several nodes
            log.info("learner rank %d on %s", self.place.rank, network)
        return data_parallel_strategy(cfg.hardware.ddp_timeout_sec, "slurm")

    def fit(self, cfg, run_dir: Path, plan, start: RunStart, fit_rank) -> dict:
        """Rank 0 trains; a collective broken by another rank's end is reported as that rank's end (its node, how it
        ended, its log: ranks.py recorded_rank_end), a lost node as NodeLost (the job is requeued for it), rank 0's
        own failure as rank 0's."""
        if not self.place.is_zero:
            return fit_rank(cfg, run_dir, plan, start, self)
        try:
            return fit_rank(cfg, run_dir, plan, start, self)
        except BaseException as e:
            if own_fault(e):
                log.error("learner rank 0 failed (%s: %s); the other ranks stop with it", type(e).__name__, e)
                raise
            ended, lost_node = recorded_rank_end(run_dir, self.place, start.session, cfg.hardware.ddp_timeout_sec,
                                                 timed_out(e))
            if lost_node is not None:  # a Slurm job is requeued for it (sf_hydra.app.requeue)
                raise NodeLost(f"the run stopped: {ended}", lost_node) from e
            raise RankFailed(f"the run stopped: {ended}") from e
