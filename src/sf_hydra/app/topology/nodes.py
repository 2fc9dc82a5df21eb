"""Several machines without Slurm or torchrun: the same `python train.py hardware.num_nodes=N hardware.devices=D ...`
on each, with MASTER_ADDR (node 0's address), MASTER_PORT and its own NODE_RANK (app/ranks.py env_rendezvous). Node
n's command is global rank n x D and starts its machine's other ranks as the one-machine case does
(sf_hydra.app.topology.local), at once; global rank 0 (node 0) holds the run folder, which every machine must see.

Every rank joins the run's process group first (topology.group: the one store, rank 0's, on MASTER_ADDR alone),
then rank 0 decides and hands the decision over through the group itself, as torchrun's workers do. What a rank
acts on is the decision in the run folder, though (ranks/start.json, written by rank 0 before it broadcasts; only the
user writes there): the one named by the start that came over the group and equal to it, which proves that the rank
sees rank 0's folder, and whose fingerprint of rank 0's config the rank compares with its own (ranks.same_config).
A stranger at MASTER_PORT can stop a start, never make a rank act on a decision of its own. Every rank > 0 records
where it runs and how it ended, which rank 0 reads when a collective breaks."""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Optional

from sf_hydra.app.ranks import (
    Rendezvous,
    config_fingerprint,
    log_to_rank_file,
    never_joined,
    node_name,
    record_rank,
    record_start,
    recorded_rank_end,
    same_config,
    use_interface_to_master,
)
from sf_hydra.app.topology.base import from_a_collective, timed_out
from sf_hydra.app.topology.folder import acted_on, forget_start, write_start
from sf_hydra.app.topology.local import LocalRanks, StartedRanks, resolved, start_local_ranks
from sf_hydra.app.topology.start import FINISHED, REFUSED, RunStart, decode, encode

log = logging.getLogger("sf_hydra")
NOT_TRAINING = (FINISHED, REFUSED)  # decisions after which no rank trains: rank 0 waits until every rank has it


class Nodes(LocalRanks):
    """Rank n x D + l: local rank l of the command on the machine with NODE_RANK=n."""

    others_wait = True

    def __init__(self, place, rendezvous: Rendezvous, timeout_sec: float):
        """rendezvous: where the machines meet (app/ranks.py env_rendezvous); timeout_sec: hardware.ddp_timeout_sec."""
        super().__init__(place)
        self.rendezvous, self.timeout_sec = rendezvous, timeout_sec
        self.started: Optional[str] = None  # this start's session: rank 0 draws it, a rank > 0 receives it
        self.others: Optional[StartedRanks] = None  # the ranks a node's first process started, until it trains

    def me(self) -> str:
        return f"learner rank {self.place.rank} on node {node_name()}"

    def hold(self, run_dir: Path):
        return self._held(run_dir)

    @contextlib.contextmanager
    def _held(self, run_dir: Path) -> Iterator[None]:
        """Rank 0 holds the folder (and forgets the previous start's decision); a rank > 0 logs to
        ranks/rank_<r>.log (a node's command logs there instead of its Hydra train.log) and, once it knows this
        start, records how it failed. When the run ends without training, the ranks this process started are
        stopped; then this rank leaves the process group."""
        from sf_hydra.app.topology import group

        with super().hold(run_dir):
            if self.place.is_zero:
                forget_start(run_dir)  # a start from elsewhere then names no decision in the folder
            elif self.place.starts_node:
                log_to_rank_file(run_dir, self.place.rank)
            try:
                yield
            except BaseException as e:
                if not self.place.is_zero and self.started is not None:
                    what = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    record_rank(run_dir, self.place, end=f"{type(e).__name__}: {what}"[:500],
                                collective=from_a_collective(e))
                raise
            finally:
                self._stop_others()
                group.leave()

    def _stop_others(self) -> None:
        """The ranks this process started and did not train beside (the run is finished, or did not start) end
        with it: they acted on the same decision."""
        others, self.others = self.others, None
        if others is not None:
            failure = others.stop(grace_sec=self.timeout_sec + 30.0)
            if failure is not None:
                log.warning("%s", failure)

    def begin(self, cfg, run_dir: Path, shapes, looked: Optional[RunStart] = None) -> RunStart:
        """Every rank meets at rank 0's store, where a node's first process starts its machine's other ranks; all
        join the process group; then rank 0 decides and hands over (base.Topology.begin)."""
        from omegaconf import OmegaConf

        from sf_hydra.app.topology import group

        if self.place.is_zero:
            self.started = uuid.uuid4().hex  # this start's name: its decision's in the folder, refused included
        store = group.meet(self.rendezvous, self.place.rank, self.timeout_sec, self.me())
        if self.place.starts_node and cfg.hardware.devices > 1:  # once the store is rank 0's, not another run's
            self.others = start_local_ranks(self.place, cfg.hardware.devices, run_dir,
                                            OmegaConf.to_yaml(resolved(cfg)))
        log.info("learner rank %d on %s", self.place.rank, use_interface_to_master())  # each rank finds its own
        group.join(store, self.rendezvous, self.place.rank, self.place.world_size, self.timeout_sec, self.me())
        return super().begin(cfg, run_dir, shapes, looked)

    def session(self) -> Optional[str]:
        return self.started

    def hand_over(self, cfg, run_dir: Path, start: RunStart) -> None:
        """Rank 0's decision, with its config's fingerprint, into the run folder, then through the process group; a
        decision not to train waits until every rank has it (its store ends with this process)."""
        from sf_hydra.app.topology import group

        start = replace(start, config=config_fingerprint(cfg))
        write_start(run_dir, start)
        group.broadcast(encode(start))
        if start.kind in NOT_TRAINING:
            _everyone_has_it(self.timeout_sec)

    def receive(self, cfg, run_dir: Path) -> RunStart:
        """Rank 0's decision, from the process group; the one acted on is the run folder's of that start, which
        must equal it. Then this rank checks that it runs rank 0's config and records itself for this start."""
        from sf_hydra.app.topology import group

        sent = decode(group.broadcast(None), self.me())
        if sent.kind in NOT_TRAINING:
            _everyone_has_it(self.timeout_sec)
        start = acted_on(run_dir, sent, self.me(), self.rendezvous.at())
        if start.kind != REFUSED:
            same_config(cfg, start.config, self.me())
            self.started = start.session
            record_start(run_dir, self.place, start.session)
        return start

    def fit(self, cfg, run_dir: Path, plan, start: RunStart, fit_rank) -> dict:
        """A node's first process trains beside the ranks it started in begin (the one-machine case starts them
        now); the others train alone."""
        if not self.place.starts_node or self.others is None:
            return fit_rank(cfg, run_dir, plan, start, self)
        others, self.others = self.others, None
        return self.fit_beside(others, cfg, run_dir, plan, start, fit_rank)

    def elsewhere(self, cfg, run_dir: Path, start: RunStart, error: BaseException, others: StartedRanks,
                  failure: Optional[str]) -> Optional[str]:
        """Rank 0 of the run: a rank of this node that hung in, or timed out of, a collective waited for one
        elsewhere, which the records name (a rank that never joined first: the others' ends follow from it)."""
        if self.place.is_zero and (failure is None or others.hung or never_joined(run_dir, self.place, start.session)):
            failure, _ = recorded_rank_end(run_dir, self.place, start.session, cfg.hardware.ddp_timeout_sec,
                                           timed_out(error), cfg.hardware.devices)
        return failure


def _everyone_has_it(timeout_sec: float) -> None:
    """Every rank waits at a barrier until all have the decision not to train: rank 0's store, which the others'
    group uses, ends with its process. A rank gone meanwhile is logged, not raised: nobody trains anyway."""
    import torch.distributed as dist

    try:
        dist.barrier()
    except Exception as e:  # a rank ended already (it failed its own checks)
        log.warning("not every learner rank confirmed the start decision within hardware.ddp_timeout_sec=%g s (%s)",
                    timeout_sec, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
