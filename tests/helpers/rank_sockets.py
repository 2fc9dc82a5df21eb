"""A callback that writes, when training starts, which TCP connections each learner rank holds: the evidence of which
link a data-parallel run's collectives travel over (`+callbacks.rank_sockets._target_=tests.helpers.rank_sockets.
WriteRankSockets`, for tests/slurm/test_slurm_two_nodes.py)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import lightning as L
import psutil


class WriteRankSockets(L.Callback):
    """`<directory>/sockets_rank_<global rank>.json`: this rank's hostname, GLOO_SOCKET_IFNAME, the rendezvous
    (MASTER_ADDR, MASTER_PORT: the TCP store, not a collective) and every established TCP connection of this process
    as [local address, local port, remote address, remote port]. Taken when training starts: the process group
    is up (gloo connected every pair of ranks when it was made, and DDP broadcast the weights over them) and no rank
    can have ended yet (at on_train_end a rank that finished first may have closed its end already)."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def on_train_start(self, trainer, pl_module):
        connections = [[c.laddr.ip, c.laddr.port, c.raddr.ip, c.raddr.port]
                       for c in psutil.Process().net_connections(kind="tcp")
                       if c.status == psutil.CONN_ESTABLISHED and c.raddr]
        record = {"hostname": socket.gethostname(), "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
                  "master_addr": os.environ.get("MASTER_ADDR"), "master_port": int(os.environ["MASTER_PORT"]),
                  "connections": connections}
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / f"sockets_rank_{trainer.global_rank}.json").write_text(json.dumps(record, indent=1))
