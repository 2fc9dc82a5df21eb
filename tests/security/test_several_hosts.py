"""What the network of a run on several machines may do (torchrun's convention: MASTER_ADDR, MASTER_PORT, NODE_RANK),
and what a rank may do to processes it only knows from a record:

- rank 0's start store listens on MASTER_ADDR's address alone, not on every interface of its machine;
- a stranger who reaches MASTER_PORT reads neither the config nor the start decision there, and a decision it forges
  is never acted on (the decision and the config's fingerprint live in the run folder, which only the user writes);
- the local ranks read their config as YAML: a pickle in its place never runs;
- a rank record naming this hostname kills a process only when the boot id and the process's start time match
  (hosts that share a hostname: cloned images, containers)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from sf_hydra.app import node_store
from sf_hydra.app.ranks import RANKS_DIR, RECORD, Ranks, free_port, node_name, recorded_rank_end
from sf_hydra.app.topology import choose
from sf_hydra.app.topology.local import resolved, start_local_ranks
from sf_hydra.app.topology.start import NEW, RunStart
from sf_hydra.core.faults import RankFailed
from tests.conftest import make_cfg
from tests.faults.runs import REPO, env_with_repo

VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
             "TORCHELASTIC_RUN_ID", "GROUP_RANK", "LOCAL_WORLD_SIZE")


def listening_addresses(port: int) -> set:
    """The local addresses of this network namespace's TCP sockets that listen on `port` (/proc/net/tcp, tcp6)."""
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)  # the kernel's words, each in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(family, raw))
    return found


def test_the_start_store_listens_on_master_addr_alone():
    port = free_port()
    node_store.serve("127.0.0.1", port, 10.0)
    try:
        addresses = listening_addresses(port)
    finally:
        node_store.release()
    assert addresses == {"127.0.0.1"}  # not 0.0.0.0 / :: (every interface of the machine)


@pytest.fixture
def two_nodes_here(monkeypatch):
    """The rendezvous variables of a run of one rank on each of two nodes, both on this machine; returns
    set_node(n), which makes this process node n's."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    return lambda n: monkeypatch.setenv("NODE_RANK", str(n))


def test_a_stranger_at_master_port_reads_no_config_and_cannot_forge_the_start(tmp_path, two_nodes_here):
    from torch.distributed import TCPStore

    overrides = ("hardware.num_nodes=2", "hardware.ddp_timeout_sec=20")
    cfg = make_cfg(tmp_path, *overrides)
    run_dir = Path(cfg.run_dir).absolute()
    evil = tmp_path / "evil.ckpt"
    two_nodes_here(0)
    rank_0 = choose(cfg)
    with rank_0.hold(run_dir):
        token = rank_0.session()
        rank_0.hand_over(cfg, run_dir, RunStart(NEW, session=token))  # a new run: no checkpoint
        stranger = TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), None, False, timeout=timedelta(seconds=5))
        seen = stranger.multi_get(stranger.list_keys())
        assert not [v for v in seen if str(tmp_path).encode() in v]  # no config, no run folder, no checkpoint
        assert not [v for v in seen if b"checkpoint" in v or b"hardware" in v]

        two_nodes_here(1)
        rank_1 = choose(make_cfg(tmp_path, *overrides))
        decision = rank_1.receive(make_cfg(tmp_path, *overrides), run_dir)
        assert (decision.session, decision.checkpoint) == (token, None)  # rank 0's real decision

        stranger.set(node_store.TOKEN, json.dumps({"session": token, "checkpoint": str(evil)}))
        try:
            forged = choose(make_cfg(tmp_path, *overrides)).receive(make_cfg(tmp_path, *overrides), run_dir)
        except RankFailed as refused:
            assert "MASTER_PORT" in str(refused), refused
        else:
            assert forged.checkpoint is None, forged  # never the stranger's checkpoint


def test_local_ranks_read_their_config_as_yaml(tmp_path):
    from omegaconf import OmegaConf

    from sf_hydra.app.ddp_rank import read_config

    cfg = make_cfg(tmp_path, "hardware.devices=1")
    run_dir = Path(cfg.run_dir).absolute()
    others = start_local_ranks(Ranks(1, 0, 0, False), 1, run_dir, OmegaConf.to_yaml(resolved(cfg)))
    others.stop(grace_sec=1.0)
    written = sorted(p.name for p in (run_dir / RANKS_DIR).iterdir())
    assert written == ["config.yaml"], written
    back = read_config(run_dir / RANKS_DIR / "config.yaml")
    assert OmegaConf.to_container(back) == OmegaConf.to_container(resolved(cfg))
    assert OmegaConf.is_struct(back)  # as Hydra composed it: a mistyped key raises, as in rank 0
    for node in ("algo", "model", "hardware", "env"):  # typed by the schema, whose dataclasses the code reads
        assert OmegaConf.get_type(back, node) is OmegaConf.get_type(cfg, node), node
    assert OmegaConf.to_object(back.algo) == OmegaConf.to_object(resolved(cfg).algo)


class _Marker:
    """Unpickled, it creates the file it names."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


def test_a_pickle_given_to_a_local_rank_never_runs(tmp_path):
    import pickle

    marker = tmp_path / "marker"
    hostile = tmp_path / "config.pkl"
    hostile.write_bytes(pickle.dumps(_Marker(marker)))
    proc = subprocess.run([sys.executable, "-m", "sf_hydra.app.ddp_rank", str(hostile)], cwd=REPO, env=env_with_repo(),
                          capture_output=True, text=True, timeout=120)
    assert not marker.exists()
    assert proc.returncode != 0, proc.stdout + proc.stderr


def _start_time(pid: int) -> str:
    """Field 22 of /proc/<pid>/stat: the process's start, in clock ticks after boot."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


BOOT = Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def test_a_record_of_this_hostname_kills_only_the_process_it_names_on_this_boot(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / RANKS_DIR).mkdir(parents=True)
    ranks = Ranks(2, 0, 0, False, via_env=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    record = dict(session="env-test", rank=1, node=node_name(), pid=bystander.pid, log="its.log", end=None,
                  collective=False)
    try:
        started = _start_time(bystander.pid)
        for other_host in (dict(boot="0" * 32, started=started),  # the same hostname, another machine
                           dict(boot=BOOT, started=str(int(started) + 1)),  # this machine, the pid reused
                           {}):  # a record that says neither
            (run_dir / RANKS_DIR / RECORD.format(rank=1)).write_text(json.dumps(dict(record, **other_host)))
            said, _ = recorded_rank_end(run_dir, ranks, "env-test", 5.0, timed_out=True)
            assert bystander.poll() is None, (other_host, said)
        (run_dir / RANKS_DIR / RECORD.format(rank=1)).write_text(json.dumps(dict(record, boot=BOOT, started=started)))
        said, _ = recorded_rank_end(run_dir, ranks, "env-test", 5.0, timed_out=True)
        assert bystander.wait(timeout=10) == -signal.SIGKILL and "killed" in said, said
    finally:
        bystander.kill()
        bystander.wait()


def test_a_rank_records_its_boot_and_start_time(tmp_path):
    from sf_hydra.app.ranks import record_start

    ranks = Ranks(2, 1, 0, False, via_env=True, node_rank=1)
    record_start(tmp_path, ranks, "env-test")
    record = json.loads((tmp_path / RANKS_DIR / RECORD.format(rank=1)).read_text())
    assert (record["pid"], record["boot"], record["started"]) == (os.getpid(), BOOT, _start_time(os.getpid()))
