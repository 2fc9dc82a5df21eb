"""How the ranks of a run on several machines without Slurm (torchrun's convention: MASTER_ADDR, MASTER_PORT,
NODE_RANK; app/ranks.py env_rendezvous) learn rank 0's start decision: through torch's TCP store at
MASTER_ADDR:MASTER_PORT, the one the process group meets at later.

Rank 0 serves the store from the start of the run (so a port in use fails it before it touches the run folder) and
keeps it: the process group made later in this process at the same port shares its server (`multi_tenant`). The
store lives as long as this start's rank 0, so what a rank reads from it is this start's, never a previous
command's; the token rank 0 draws names this start (ranks.session_of) in every rank's record and in
<run_dir>/ranks/start.json, which a rank on another machine reads to prove it sees the same run folder.

Loaded by app/train.py only for such runs (torch is imported here, not by app/ranks.py)."""

from __future__ import annotations

import socket
import time
import uuid
from datetime import timedelta
from typing import Optional, Tuple

from sf_hydra.core.faults import RankFailed

DECISION = "sf_hydra/start"  # rank 0's StartDecision as JSON
CONFIG = "sf_hydra/config"  # rank 0's composed config, resolved, as YAML: every node must run the same command
READ = "sf_hydra/read"  # how many ranks > 0 read the decision (a counter)
_server = None  # rank 0's store (torch.distributed.TCPStore), kept until the run ends (release)


def serve(address: str, port: int, timeout_sec: float) -> str:
    """Rank 0 starts the store at `port` (every interface; `address` is where the others reach it) and returns a
    fresh token naming this start. RankFailed, naming MASTER_PORT, when the port is taken (another run, or an
    earlier one of this command still ending)."""
    global _server
    from torch.distributed import TCPStore

    try:
        _server = TCPStore(address, port, None, True, timeout=timedelta(seconds=timeout_sec), wait_for_workers=False,
                           multi_tenant=True)
    except Exception as e:  # torch's DistNetworkError: address in use, or an address not of this machine
        raise RankFailed(f"learner rank 0 cannot serve the ranks' TCP store at MASTER_ADDR={address} "
                         f"MASTER_PORT={port} ({str(e).strip().splitlines()[0] if str(e).strip() else e}): pick "
                         "a free MASTER_PORT, the same on every machine") from e
    return f"env-{uuid.uuid4().hex}"


def publish(decision_json: str, config_yaml: Optional[str]) -> None:
    """Rank 0 hands its decision (and the config it runs, when it got that far) to every other rank."""
    if config_yaml is not None:
        _server.set(CONFIG, config_yaml)
    _server.set(DECISION, decision_json)


def await_readers(count: int, timeout_sec: float) -> int:
    """Rank 0, which will not train (the run is finished, or it failed to start), waits up to `timeout_sec` until
    `count` ranks read its decision: its store ends with this process. Returns how many did."""
    deadline = time.monotonic() + timeout_sec
    while (read := _server.add(READ, 0)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return read


def release() -> None:
    """Rank 0 drops its store once the run ended (a later run in this process serves its own)."""
    global _server
    _server = None


def fetch(address: str, port: int, timeout_sec: float, who: str) -> Tuple[str, Optional[str]]:
    """A rank > 0 (`who`: its rank and node) waits up to `timeout_sec` for rank 0's store and its decision;
    returns (the decision's JSON, rank 0's config's YAML or None). RankFailed naming MASTER_ADDR:MASTER_PORT when
    none comes: rank 0 is not started, failed before deciding, or is not reachable from here."""
    deadline = time.monotonic() + timeout_sec
    try:
        store = _connect(address, port, deadline)
        store.set_timeout(timedelta(seconds=max(1.0, deadline - time.monotonic())))
        store.wait([DECISION])
        decision = store.get(DECISION).decode()
        config = store.get(CONFIG).decode() if store.check([CONFIG]) else None
        store.add(READ, 1)
    except Exception as e:  # torch's DistStoreError / DistNetworkError: no store, or no decision in time
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RankFailed(f"{who}: no start decision from learner rank 0 at MASTER_ADDR={address} "
                         f"MASTER_PORT={port} within hardware.ddp_timeout_sec={timeout_sec:g} s ({first}): start "
                         "the same command with NODE_RANK=0 on the machine at MASTER_ADDR (see its train.log), and "
                         "check that this machine reaches that address and port") from e
    return decision, config


def _connect(address: str, port: int, deadline: float):
    """A client of the store at address:port once it accepts connections, tried until `deadline`
    (time.monotonic()) with plain sockets first: torch's client, given the whole timeout, retries with delays that
    overrun it and logs every failed attempt."""
    from torch.distributed import TCPStore

    while True:
        try:
            socket.create_connection((address, port), timeout=max(0.5, min(5.0, deadline - time.monotonic()))).close()
            break
        except OSError:  # refused or unreachable: rank 0 has not started its store yet
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)
    return TCPStore(address, port, None, False, timeout=timedelta(seconds=max(1.0, deadline - time.monotonic())))
