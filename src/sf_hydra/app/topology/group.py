"""The process group of a run on several machines without Slurm or torchrun (sf_hydra.app.topology.nodes), made
before the start is decided, and what crosses a process group before training (rank 0's decision: `broadcast`).

The group meets at torch's TCP store at MASTER_ADDR:MASTER_PORT, the one store of the run: rank 0 serves it from
the start (so a port in use fails it before it touches the run folder), on MASTER_ADDR's address alone (torch's own
server listens on every interface of the machine: here it gets a socket bound to that address), and every other
rank is its client. Lightning's DDP strategy later trains in this very group. The store has no authentication:
nothing a rank acts on is taken from it (rank 0's decision and its config's fingerprint are read from the run
folder, which only the user writes; sf_hydra.app.topology.nodes).

Loaded only by runs of several ranks (torch is imported here, not by app/ranks.py)."""

from __future__ import annotations

import errno
import socket
import time
from datetime import timedelta
from typing import Optional

from sf_hydra.app.ranks import Rendezvous
from sf_hydra.core.faults import RankFailed


def meet(rendezvous: Rendezvous, rank: int, timeout_sec: float, who: str):
    """The run's store: rank 0 serves it, the others connect to it (RankFailed naming MASTER_ADDR and MASTER_PORT
    when it cannot be served or reached: serve, connect)."""
    if rank == 0:
        return serve(rendezvous.address, rendezvous.port, timeout_sec)
    return connect(rendezvous.address, rendezvous.port, timeout_sec, who)


def join(store, rendezvous: Rendezvous, rank: int, world_size: int, timeout_sec: float, who: str) -> None:
    """This rank joins the run's gloo process group over `store` (meet's). RankFailed naming MASTER_ADDR and
    MASTER_PORT when not every rank joined within `timeout_sec` (hardware.ddp_timeout_sec)."""
    import torch.distributed as dist

    try:
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_sec))
    except Exception as e:  # torch's DistStoreError / DistNetworkError: a rank missing, or gone while joining
        raise RankFailed(f"{who}: not all {world_size} learner ranks joined the run at MASTER_ADDR="
                         f"{rendezvous.address} MASTER_PORT={rendezvous.port} within hardware.ddp_timeout_sec="
                         f"{timeout_sec:g} s ({_first_line(e)}): start the same command on every machine, each with "
                         "its own NODE_RANK (see each machine's output), and check that they reach that address and "
                         "port") from e


def serve(address: str, port: int, timeout_sec: float):
    """Rank 0's store (torch.distributed.TCPStore) at `address`:`port`, that address alone (the interface the
    others reach it through). RankFailed, naming MASTER_ADDR and MASTER_PORT, when the port is taken (another
    run, or an earlier one of this command still ending) or the address is not this machine's."""
    from torch.distributed import TCPStore

    try:
        listening = _listen(address, port)
    except OSError as e:
        taken = e.errno == errno.EADDRINUSE
        raise RankFailed(f"learner rank 0 cannot serve the ranks' TCP store at MASTER_ADDR={address} "
                         f"MASTER_PORT={port} ({e.strerror or e}): "
                         + ("pick a free MASTER_PORT, the same on every machine" if taken else
                            "MASTER_ADDR must be this machine's address (node 0's), one the other machines reach")
                         ) from e
    with listening:
        try:
            store = TCPStore(address, port, None, True, timeout=timedelta(seconds=timeout_sec),
                             wait_for_workers=False, master_listen_fd=listening.fileno())
        except Exception as e:  # torch's DistNetworkError
            raise RankFailed(f"learner rank 0 cannot serve the ranks' TCP store at MASTER_ADDR={address} "
                             f"MASTER_PORT={port} ({_first_line(e)})") from e
        listening.detach()  # the store's server owns the socket now and closes it when it ends
    return store


def _listen(address: str, port: int) -> socket.socket:
    """A TCP socket listening at `address` (a name: the address it resolves to here) and `port`, for the store's
    server. OSError: the name does not resolve, the address is not this machine's, or the port is taken."""
    family, kind, proto, _, where = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    listening = socket.socket(family, kind, proto)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's server: a port in TIME_WAIT
        listening.bind(where)
        listening.listen(socket.SOMAXCONN)
    except OSError:
        listening.close()
        raise
    return listening


def connect(address: str, port: int, timeout_sec: float, who: str):
    """A client of rank 0's store once it accepts connections, tried for up to `timeout_sec` with plain sockets
    first (torch's client, given the whole timeout, retries with delays that overrun it and logs every failed
    attempt). RankFailed naming MASTER_ADDR:MASTER_PORT when none answers (rank 0 is not started, failed before it
    served, or is not reachable from here)."""
    from torch.distributed import TCPStore

    deadline = time.monotonic() + timeout_sec
    try:
        while True:
            try:
                socket.create_connection((address, port),
                                         timeout=max(0.5, min(5.0, deadline - time.monotonic()))).close()
                break
            except OSError:  # refused or unreachable: rank 0 has not started its store yet
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)
        return TCPStore(address, port, None, False, timeout=timedelta(seconds=max(1.0, deadline - time.monotonic())))
    except Exception as e:
        raise RankFailed(f"{who}: no learner rank 0 at MASTER_ADDR={address} MASTER_PORT={port} within "
                         f"hardware.ddp_timeout_sec={timeout_sec:g} s ({_first_line(e)}): start the same command "
                         "with NODE_RANK=0 on the machine at MASTER_ADDR (see its train.log), and check that this "
                         "machine reaches that address and port") from e


def broadcast(data: Optional[bytes]) -> bytes:
    """Rank 0's `data` to every rank of the process group, returned there; other ranks pass None. Two broadcasts
    of plain tensors: the length, then the bytes (no pickle crosses the network)."""
    import torch
    import torch.distributed as dist

    length = torch.tensor([len(data) if data is not None else 0], dtype=torch.int64)
    dist.broadcast(length, 0)
    buffer = (torch.frombuffer(bytearray(data), dtype=torch.uint8) if data is not None
              else torch.empty(int(length.item()), dtype=torch.uint8))
    dist.broadcast(buffer, 0)
    return data if data is not None else bytes(buffer.tolist())


def leave() -> None:
    """This rank leaves the process group, if it is in one (a run that did not train has no Lightning strategy to
    end it)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
