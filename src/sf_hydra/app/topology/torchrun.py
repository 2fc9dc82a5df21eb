"""torchrun's workers (torch.distributed.run, TorchElastic), one per rank, on one machine or several:

    torchrun --nproc-per-node=D train.py hardware.devices=D ...
    torchrun --nnodes=N --nproc-per-node=D --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT train.py \
        hardware.num_nodes=N hardware.devices=D ...

Each worker is one rank (RANK, LOCAL_RANK, GROUP_RANK, WORLD_SIZE: Lightning's TorchElasticEnvironment), and nothing
is started by us. Global rank 0 holds the run folder (the command line lets only its Hydra write there:
worker_overrides); the process group is made as soon as every rank checked its config (on torchrun's store, under
a prefix this start's workers agree on: _this_start_store), and rank 0's decision
reaches the others through it: the decision's JSON in a tensor of bytes, its length first (handover), with the
fingerprint of rank 0's config, which every rank compares with its own, and the name of this start, which every
rank must find in the run folder it sees (a shared filesystem on several machines). Lightning's DDP strategy then
trains in that very group.

An elastic restart (`torchrun --max-restarts=K`, a worker lost) starts every worker again: rank 0 finds the run's
last checkpoint in the same folder and the run resumes."""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from sf_hydra.app.ranks import RANKS_DIR, config_fingerprint, node_name, same_config, use_interface_to_master
from sf_hydra.app.topology.base import Topology
from sf_hydra.app.topology.folder import acted_on, forget_start, write_start
from sf_hydra.app.topology.group import broadcast, leave
from sf_hydra.app.topology.start import REFUSED, RunStart, decode, encode
from sf_hydra.core.faults import RankFailed

log = logging.getLogger("sf_hydra")
ELASTIC = "TORCHELASTIC_RUN_ID"  # set by torchrun in its workers alone


def in_torchrun() -> bool:
    return ELASTIC in os.environ


def worker_overrides() -> List[str]:
    """What the command line adds for a torchrun worker of rank > 0: Hydra writes nothing into the run folder (no
    `.hydra/`, no train.log: rank 0's), and the worker logs to its output until it logs to ranks/rank_<r>.log."""
    if not in_torchrun() or os.environ.get("RANK", "0") == "0":
        return []
    return ["hydra.output_subdir=null", "hydra/job_logging=stdout", "~hydra.job_logging.handlers.file"]


class TorchrunWorkers(Topology):
    """Rank RANK of torchrun's WORLD_SIZE workers."""

    others_wait = True

    def hold(self, run_dir: Path):
        return self._grouped(run_dir)

    @contextlib.contextmanager
    def _grouped(self, run_dir: Path) -> Iterator[None]:
        """Rank 0 holds the folder; a rank > 0 logs to ranks/rank_<r>.log; the process group made for this start is
        destroyed when it ends (a run that did not train has no Lightning strategy to do it)."""
        with super().hold(run_dir):
            if self.place.is_zero:
                forget_start(run_dir)  # an earlier start's decision names no start of this one
            own_log = None if self.place.is_zero else _log_to_rank_file(run_dir, self.place.rank)
            try:
                yield
            finally:
                leave()
                if own_log is not None:
                    logging.getLogger().removeHandler(own_log)
                    own_log.close()

    def begin(self, cfg, run_dir: Path, shapes, looked: Optional[RunStart] = None) -> RunStart:
        """Every rank joins the process group (after its own checks), then rank 0 decides and hands over."""
        import torch.distributed as dist

        log.info("learner rank %d of torchrun's %d workers on %s (node %d)", self.place.rank, self.place.world_size,
                 node_name(), self.place.node_rank)
        if cfg.hardware.num_nodes > 1:
            log.info("learner rank %d on %s", self.place.rank, use_interface_to_master())
        timeout = timedelta(seconds=cfg.hardware.ddp_timeout_sec)
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":  # torchrun's one store, kept over restarts
            store = _this_start_store(self.place.rank, self.place.world_size, timeout)
            dist.init_process_group("gloo", store=store, rank=self.place.rank, world_size=self.place.world_size,
                                    timeout=timeout)
        else:
            dist.init_process_group("gloo", timeout=timeout)
        return super().begin(cfg, run_dir, shapes, looked)

    def hand_over(self, cfg, run_dir: Path, start: RunStart) -> None:
        """Rank 0's decision, with its config's fingerprint, into the run folder, then through the process group."""
        start = replace(start, config=config_fingerprint(cfg))
        write_start(run_dir, start)
        broadcast(encode(start))

    def receive(self, cfg, run_dir: Path) -> RunStart:
        """Rank 0's decision from the process group; the one acted on is the run folder's of that start, which must
        equal it (this rank sees rank 0's folder: folder.acted_on); then the config this rank composed must be rank
        0's."""
        who = f"learner rank {self.place.rank} on node {node_name()}"
        sent = decode(broadcast(None), who)
        if sent.kind == REFUSED:
            return sent
        at = f"MASTER_ADDR={os.environ.get('MASTER_ADDR')} MASTER_PORT={os.environ.get('MASTER_PORT')}"
        start = acted_on(run_dir, sent, who, f"torchrun's store ({at})")
        same_config(cfg, start.config, who)
        return start

    def strategy(self, cfg):
        from sf_hydra.learner.ddp import data_parallel_strategy

        return data_parallel_strategy(cfg.hardware.ddp_timeout_sec, "torchrun")


def _this_start_store(rank: int, world: int, timeout: timedelta):
    """torchrun's store (MASTER_ADDR:MASTER_PORT, its rendezvous's, which it shares with its workers and keeps over
    elastic restarts) under a prefix of this start's own. The process group's keys of an earlier start are still
    in that store, and a worker that reads one (a peer's address from before the restart) waits on a port nobody
    listens to until the timeout (torch's restart counts are no prefix: they differ between machines). So the
    workers agree on a fresh prefix first: rank 0 draws it and hands it to each worker in answer to that worker's
    own fresh token, which no key of an earlier start holds; the worker confirms with both. Only tokens travel."""
    import torch.distributed as dist

    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False,
                          timeout=timeout)
    mine, deadline = uuid.uuid4().hex, time.monotonic() + timeout.total_seconds()

    def read(key: str) -> str:
        return store.get(key).decode() if store.check([key]) else ""

    def waited(what: str) -> None:
        if time.monotonic() > deadline:
            raise RankFailed(f"learner rank {rank} on node {node_name()}: torchrun's workers did not agree on this "
                             f"start within hardware.ddp_timeout_sec={timeout.total_seconds():g} s: {what} (see that "
                             "rank's log: rank 0's is the run folder's train.log, the others' ranks/rank_<r>.log; "
                             "raise hardware.ddp_timeout_sec if their start-up is that slow)")
        time.sleep(0.05)

    if rank == 0:
        answered: Dict[int, str] = {}
        waiting = set(range(1, world))
        while waiting:
            for r in sorted(waiting):
                token = read(f"sf_hydra/hello/{r}")
                if token and answered.get(r) != token:
                    store.set(f"sf_hydra/answer/{r}", f"{token}:{mine}")
                    answered[r] = token
                if token and read(f"sf_hydra/confirm/{r}") == f"{token}:{mine}":
                    waiting.discard(r)
            if waiting:
                waited(f"no word from rank(s) {', '.join(map(str, sorted(waiting)))}")
        prefix = mine
    else:
        store.set(f"sf_hydra/hello/{rank}", mine)
        while not read(f"sf_hydra/answer/{rank}").startswith(mine + ":"):
            waited("no answer from rank 0")
        prefix = read(f"sf_hydra/answer/{rank}").split(":", 1)[1]
        store.set(f"sf_hydra/confirm/{rank}", f"{mine}:{prefix}")
    return dist.PrefixStore(f"sf_hydra/start/{prefix}", store)


def _log_to_rank_file(run_dir: Path, rank: int) -> logging.Handler:
    """A worker of rank > 0 logs into <run_dir>/ranks/rank_<rank>.log too (its output is torchrun's); returns the
    handler."""
    root = logging.getLogger()
    folder = run_dir / RANKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(folder / f"rank_{rank}.log")
    handler.setFormatter(logging.Formatter(f"[%(asctime)s][rank {rank}][%(levelname)s] %(message)s"))
    root.addHandler(handler)
    return handler
