"""Several machines without Slurm or torchrun: the same `python train.py hardware.num_nodes=N hardware.devices=D ...`
on each, with MASTER_ADDR (node 0's address), MASTER_PORT and its own NODE_RANK (app/ranks.py env_rendezvous). Node
n's command is global rank n x D and starts its machine's other ranks as the one-machine case does
(sf_hydra.app.topology.local); global rank 0 (node 0) holds the run folder, which every machine must see.

Rank 0's decision, with the fingerprint of its config, is written into the run folder (topology.folder); the token
naming this start reaches each node's first process through rank 0's TCP store at MASTER_ADDR:MASTER_PORT
(app/node_store.py), and that process reads the decision it names in the folder (which proves it sees the folder),
compares its own config with rank 0's (ranks.same_config) and hands the decision to the ranks it starts. Every rank
> 0 records where it runs and how it ended, which rank 0 reads when a collective breaks."""

from __future__ import annotations

import contextlib
import logging
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
from sf_hydra.app.topology.folder import forget_start, sees_run_folder, write_start
from sf_hydra.app.topology.local import LocalRanks, StartedRanks
from sf_hydra.app.topology.start import FINISHED, REFUSED, RunStart

log = logging.getLogger("sf_hydra")


class Nodes(LocalRanks):
    """Rank n x D + l: local rank l of the command on the machine with NODE_RANK=n."""

    others_wait = True

    def __init__(self, place, rendezvous: Rendezvous, timeout_sec: float):
        """rendezvous: where the machines meet (app/ranks.py env_rendezvous); timeout_sec: hardware.ddp_timeout_sec."""
        super().__init__(place)
        self.rendezvous, self.timeout_sec = rendezvous, timeout_sec
        self.started: Optional[str] = None  # this start's session, once known

    def me(self) -> str:
        return f"learner rank {self.place.rank} on node {node_name()}"

    def hold(self, run_dir: Path):
        return self._served(run_dir) if self.place.is_zero else self._recorded(run_dir)

    @contextlib.contextmanager
    def _served(self, run_dir: Path) -> Iterator[None]:
        """Rank 0 holds the folder and serves the store of this start (a port in use fails it before the folder is
        touched) until the run ends."""
        from sf_hydra.app import node_store  # torch's TCP store: only for runs on several machines

        with super().hold(run_dir):
            forget_start(run_dir)  # a token from elsewhere then names no decision in the folder
            self.started = node_store.serve(self.rendezvous.address, self.rendezvous.port, self.timeout_sec)
            try:
                yield
            finally:
                node_store.release()

    @contextlib.contextmanager
    def _recorded(self, run_dir: Path) -> Iterator[None]:
        """A rank > 0 logs to ranks/rank_<r>.log (a node's command logs there instead of its Hydra train.log) and,
        once it knows this start, records itself and, when it fails, how."""
        if self.place.starts_node:
            log_to_rank_file(run_dir, self.place.rank)
        try:
            yield
        except BaseException as e:
            if self.started is not None:
                what = str(e).strip().splitlines()[0] if str(e).strip() else ""
                record_rank(run_dir, self.place, end=f"{type(e).__name__}: {what}"[:500],
                            collective=from_a_collective(e))
            raise

    def session(self) -> Optional[str]:
        return self.started

    def hand_over(self, cfg, run_dir: Path, start: RunStart) -> None:
        """Rank 0's decision, with its config's fingerprint, to ranks/start.json, then its token to the store; a
        decision not to train waits until every other machine read the token (up to hardware.ddp_timeout_sec)."""
        from sf_hydra.app import node_store

        write_start(run_dir, replace(start, config=config_fingerprint(cfg)))
        node_store.publish(start.session)
        if start.kind in (FINISHED, REFUSED):  # no process group will wait for them
            others = cfg.hardware.num_nodes - 1
            read = node_store.await_readers(others, cfg.hardware.ddp_timeout_sec)
            if read < others:
                log.warning("%d of the %d other machines read learner rank 0's decision within "
                            "hardware.ddp_timeout_sec=%g s", read, others, cfg.hardware.ddp_timeout_sec)

    def receive(self, cfg, run_dir: Path) -> RunStart:
        """A node's first process gets the token of this start from rank 0's store and reads the decision it names
        in the run folder, then checks that it runs rank 0's config; a rank it started gets the decision from it.
        Each records itself for this start."""
        if self.place.starts_node:
            from sf_hydra.app import node_store

            token = node_store.fetch(self.rendezvous.address, self.rendezvous.port, cfg.hardware.ddp_timeout_sec,
                                     self.me())
            start = sees_run_folder(run_dir, token, self.me())
            if start.kind != REFUSED:
                same_config(cfg, start.config, self.me())  # its ranks then run the config it writes for them
        else:
            start = super().receive(cfg, run_dir)
        if start.kind != REFUSED:
            self.started = start.session
            record_start(run_dir, self.place, start.session)
        return start

    def strategy(self, cfg):
        log.info("learner rank %d on %s", self.place.rank, use_interface_to_master())
        return super().strategy(cfg)

    def elsewhere(self, cfg, run_dir: Path, start: RunStart, error: BaseException, others: StartedRanks,
                  failure: Optional[str]) -> Optional[str]:
        """Rank 0 of the run: a rank of this node that hung in, or timed out of, a collective waited for one
        elsewhere, which the records name (a rank that never joined first: the others' ends follow from it)."""
        if self.place.is_zero and (failure is None or others.hung or never_joined(run_dir, self.place, start.session)):
            failure, _ = recorded_rank_end(run_dir, self.place, start.session, cfg.hardware.ddp_timeout_sec,
                                           timed_out(error), cfg.hardware.devices)
        return failure
