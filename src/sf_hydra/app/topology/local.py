"""Several ranks on one machine, started by the command itself (`python train.py hardware.devices=D`).

The command's process is rank 0: it holds the run folder, decides the start and then starts ranks 1.. as
`python -m sf_hydra.app.ddp_rank <run_dir>/ranks/config.yaml` (the composed config, resolved, as YAML), each logging
to ranks/rank_<r>.log. A started rank gets rank 0's decision in its environment (START_VARIABLE: the decision's JSON,
sf_hydra.app.topology.start.decode), so it never reads the folder to decide anything; Lightning's
LightningEnvironment joins them from MASTER_ADDR, MASTER_PORT, WORLD_SIZE, NODE_RANK, LOCAL_RANK."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from sf_hydra.app.ranks import RANK_CONFIG, RANKS_DIR, Ranks, free_port, last_error, node_name, process_state
from sf_hydra.app.topology.base import Topology, from_a_collective, own_fault, timed_out
from sf_hydra.app.topology.start import RunStart, decode, encode
from sf_hydra.core.faults import RankFailed

log = logging.getLogger("sf_hydra")
START_VARIABLE = "SF_HYDRA_RUN_START"  # rank 0's decision (JSON) in the environment of the ranks it starts


@dataclass
class StartedRanks:
    """The ranks a node's first process started on its machine (ranks `first`.. of the run)."""

    processes: List[subprocess.Popen]
    logs: List[Path]
    saved_env: Dict[str, Optional[str]]  # this process's rendezvous variables before the ranks started
    hung: Dict[int, str] = field(default_factory=dict)  # rank -> its process state when stop() had to end it
    first: int = 1  # the global rank of processes[0]
    node: str = ""  # on several machines: this one's name, for the messages

    def failed(self) -> Optional[str]:
        """A message naming the first rank that exited with an error (its exit code and log), or None."""
        for r, (p, log_file) in enumerate(zip(self.processes, self.logs), start=self.first):
            code = p.poll()
            who = f"learner rank {r}" + (f" on node {self.node}" if self.node else "")
            if r in self.hung:
                what = "was stopped (SIGSTOP or a debugger)" if self.hung[r] in ("T", "t") else "hung"
                return (f"{who} {what}: it answered no collective within hardware.ddp_timeout_sec and did "
                        f"not end with the run, so it was killed (its log: {log_file})")
            if code not in (None, 0):
                how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                cause = last_error(log_file)
                return f"{who} {how}{': ' + cause if cause else ''} (its log: {log_file})"
        return None

    def stop(self, grace_sec: float) -> Optional[str]:
        """Waits up to `grace_sec` for every rank to end (they stop with rank 0), then terminates (a stopped one:
        kills), then kills what is left: no rank outlives this call. Returns failed()'s message, which names a
        rank that had to be ended as hung."""
        deadline = time.monotonic() + grace_sec
        for r, p in enumerate(self.processes, start=self.first):
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.hung[r] = process_state(p.pid) or "?"
                p.kill() if self.hung[r] in ("T", "t") else p.terminate()  # a stopped process acts on no SIGTERM
        for p in self.processes:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for name, value in self.saved_env.items():  # a later run in this process starts from them again
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        return self.failed()


def _write_private(path: Path, text: str) -> None:
    """`text` into `path`, readable by the user alone: a resolved config holds the values it took from the
    environment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w") as out:
        os.fchmod(fd, 0o600)  # a file an earlier run left keeps its mode otherwise
        out.write(text)


def start_local_ranks(ranks: Ranks, devices: int, run_dir: Path, config_yaml: str,
                      start: Optional[RunStart] = None) -> StartedRanks:
    """This process, local rank 0 of its node, starts the node's other `devices` - 1 ranks, each
    `python -m sf_hydra.app.ddp_rank` reading the run's composed config (`config_yaml`, resolved: YAML, never a
    pickle) from <run_dir>/ranks/ and logging to ranks/rank_<its global rank>.log, with rank 0's decision `start` in
    its environment; sets this process's rendezvous variables (Lightning's LightningEnvironment reads them in every
    rank): on one machine a free port of 127.0.0.1, on several (via_env) the MASTER_ADDR, MASTER_PORT and NODE_RANK
    the command was given."""
    folder = run_dir / RANKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / (RANK_CONFIG if ranks.node_rank == 0 else f"config_node_{ranks.node_rank}.yaml")
    _write_private(config, config_yaml)
    rendezvous = dict(WORLD_SIZE=str(ranks.world_size), LOCAL_RANK="0")
    if not ranks.via_env:
        rendezvous.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), NODE_RANK="0")
    saved = {name: os.environ.get(name) for name in rendezvous}
    os.environ.update(rendezvous)
    processes, logs = [], []
    decision = {START_VARIABLE: encode(start).decode()} if start is not None else {}
    for local in range(1, devices):
        log_file = folder / f"rank_{ranks.rank + local}.log"
        env = dict(os.environ, LOCAL_RANK=str(local), **decision)
        with open(log_file, "ab") as out:
            processes.append(subprocess.Popen([sys.executable, "-m", "sf_hydra.app.ddp_rank", str(config)], env=env,
                                              stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        logs.append(log_file)
    return StartedRanks(processes, logs, saved, first=ranks.rank + 1, node=node_name() if ranks.via_env else "")


def resolved(cfg):
    """A copy of `cfg` with every interpolation resolved (what the started ranks train with: they have no Hydra)."""
    from omegaconf import OmegaConf

    copy = cfg.copy()
    OmegaConf.resolve(copy)
    return copy


class LocalRanks(Topology):
    """Ranks 0 .. D-1 on this machine: rank 0 (the command) starts the others once it decided the start."""

    def receive(self, cfg, run_dir: Path) -> RunStart:
        """A started rank's decision: the one in its environment, which the process that started it put there."""
        return decode(os.environ.get(START_VARIABLE, "").encode(), f"learner rank {self.place.rank}")

    def strategy(self, cfg):
        from sf_hydra.learner.ddp import data_parallel_strategy

        return data_parallel_strategy(cfg.hardware.ddp_timeout_sec, "local")

    def fit(self, cfg, run_dir: Path, plan, start: RunStart, fit_rank) -> dict:
        if not self.place.starts_node:
            return fit_rank(cfg, run_dir, plan, start, self)
        from omegaconf import OmegaConf

        others = start_local_ranks(self.place, cfg.hardware.devices, run_dir, OmegaConf.to_yaml(resolved(cfg)), start)
        return self.fit_beside(others, cfg, run_dir, plan, start, fit_rank)

    def fit_beside(self, others: StartedRanks, cfg, run_dir: Path, plan, start: RunStart, fit_rank) -> dict:
        """This process (local rank 0 of its node) trains beside the node's other ranks, which it started, and stops
        them with it. A collective broken by another rank's end is reported as that rank's end: one of this node's
        (its exit code, its log), else one elsewhere (elsewhere())."""
        try:
            summary = fit_rank(cfg, run_dir, plan, start, self)
        except BaseException as e:
            hung = from_a_collective(e) and timed_out(e)  # a rank that still runs answers no collective: no grace
            failure = others.stop(grace_sec=3.0 if hung else 30.0)
            if not own_fault(e):
                failure = self.elsewhere(cfg, run_dir, start, e, others, failure)
            if failure is not None and not own_fault(e):  # this error (a collective's) follows from that rank's
                raise RankFailed(f"the run stopped: {failure}") from e
            log.error("%s failed (%s: %s); the other ranks stopped with it", self.me(), type(e).__name__, e)
            raise
        failure = others.stop(grace_sec=cfg.hardware.ddp_timeout_sec + 30.0)
        if failure is not None:
            raise RankFailed(f"the run stopped: {failure}")
        return summary

    def elsewhere(self, cfg, run_dir: Path, start: RunStart, error: BaseException, others: StartedRanks,
                  failure: Optional[str]) -> Optional[str]:
        """The end of a rank on another machine that broke this rank's collective (one machine: none)."""
        return failure

    def me(self) -> str:
        return f"learner rank {self.place.rank}"
