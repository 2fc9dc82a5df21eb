"""How the ranks of a run on several machines without Slurm (torchrun's convention: MASTER_ADDR, MASTER_PORT,
NODE_RANK; app/ranks.py env_rendezvous) learn which start of the run they belong to: through torch's TCP store at
MASTER_ADDR:MASTER_PORT, the one the process group meets at later.

What travels there is a random token naming this start, and how many ranks read it: nothing else. Rank 0's
decision (new run, resume from which checkpoint, finished, failed) and the fingerprint of the config it runs are
written into the run folder (<run_dir>/ranks/start.json), which every machine must share and only the user writes;
a rank reads the decision of the token it got there, so a stranger who reaches MASTER_PORT (the store has no
authentication) can stop a start but never make a rank act on a decision of its own (a token of its own names no
decision: rank 0 removes the previous start's before it serves; ranks.forget_start) and reads no config. The store
stays, rather than the process group carrying the token: the decision comes before any group exists (a finished or
failed start makes none; node n starts its local ranks once it knows the decision), and the group's rendezvous
later shares this very server (`multi_tenant`): one listening socket, not two.

Rank 0 serves the store from the start of the run (so a port in use fails it before it touches the run folder) on
MASTER_ADDR's address alone (torch's own server listens on every interface of the machine: here it gets a socket
bound to that address), and keeps it: the process group made later in this process at the same port shares its
server. The store lives as long as this start's rank 0, so a token read from it is this start's, never a previous
command's (ranks.session_of).

Loaded by app/train.py only for such runs (torch is imported here, not by app/ranks.py)."""

from __future__ import annotations

import errno
import re
import socket
import time
import uuid
from datetime import timedelta

from sf_hydra.core.faults import RankFailed

TOKEN = "sf_hydra/start"  # the token of this start (rank 0 draws it: serve), which names its decision in the folder
READ = "sf_hydra/read"  # how many ranks > 0 read the token (a counter)
TOKEN_FORM = re.compile(r"env-[0-9a-f]{32}")  # what serve draws: anything else at TOKEN came from another process
_server = None  # rank 0's store (torch.distributed.TCPStore), kept until the run ends (release)


def serve(address: str, port: int, timeout_sec: float) -> str:
    """Rank 0 starts the store at `address`:`port` (that address alone: the interface the others reach it
    through) and returns a fresh token naming this start. RankFailed, naming MASTER_ADDR and MASTER_PORT, when the
    port is taken (another run, or an earlier one of this command still ending) or the address is not this
    machine's."""
    global _server
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
            _server = TCPStore(address, port, None, True, timeout=timedelta(seconds=timeout_sec),
                               wait_for_workers=False, multi_tenant=True, master_listen_fd=listening.fileno())
        except Exception as e:  # torch's DistNetworkError
            raise RankFailed(f"learner rank 0 cannot serve the ranks' TCP store at MASTER_ADDR={address} "
                             f"MASTER_PORT={port} ({str(e).strip().splitlines()[0] if str(e).strip() else e})") from e
        listening.detach()  # the store's server owns the socket now and closes it when it ends
    return f"env-{uuid.uuid4().hex}"


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


def publish(token: str) -> None:
    """Rank 0 hands the token of this start, whose decision is in the run folder, to every other rank."""
    _server.set(TOKEN, token)


def await_readers(count: int, timeout_sec: float) -> int:
    """Rank 0, which will not train (the run is finished, or it failed to start), waits up to `timeout_sec` until
    `count` ranks read its token: its store ends with this process. Returns how many did."""
    deadline = time.monotonic() + timeout_sec
    while (read := _server.add(READ, 0)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return read


def release() -> None:
    """Rank 0 drops its store once the run ended (a later run in this process serves its own)."""
    global _server
    _server = None


def fetch(address: str, port: int, timeout_sec: float, who: str) -> str:
    """A rank > 0 (`who`: its rank and node) waits up to `timeout_sec` for rank 0's store and its token; returns
    the token. RankFailed naming MASTER_ADDR:MASTER_PORT when none comes (rank 0 is not started, failed before
    deciding, or is not reachable from here), or when what the store holds is no token rank 0 draws."""
    deadline = time.monotonic() + timeout_sec
    try:
        store = _connect(address, port, deadline)
        store.set_timeout(timedelta(seconds=max(1.0, deadline - time.monotonic())))
        store.wait([TOKEN])
        token = store.get(TOKEN).decode(errors="replace")
        store.add(READ, 1)
    except Exception as e:  # torch's DistStoreError / DistNetworkError: no store, or no decision in time
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RankFailed(f"{who}: no start decision from learner rank 0 at MASTER_ADDR={address} "
                         f"MASTER_PORT={port} within hardware.ddp_timeout_sec={timeout_sec:g} s ({first}): start "
                         "the same command with NODE_RANK=0 on the machine at MASTER_ADDR (see its train.log), and "
                         "check that this machine reaches that address and port") from e
    if not TOKEN_FORM.fullmatch(token):
        raise RankFailed(f"{who}: the store at MASTER_ADDR={address} MASTER_PORT={port} holds no token of learner "
                         f"rank 0 ({token[:40]!r}...): another process wrote to it. MASTER_PORT must be reachable "
                         "by this run's machines alone")
    return token


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
