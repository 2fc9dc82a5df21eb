"""What the network of a run on several machines may do (torchrun's convention: MASTER_ADDR, MASTER_PORT, NODE_RANK),
and what a rank may do to processes it only knows from a record:

- rank 0's store, the run's one, listens on MASTER_ADDR's address alone, not on every interface of its machine;
- a stranger who reaches MASTER_PORT reads neither the config nor the start decision there, and a decision it forges
  over the process group is never acted on (a rank acts on the decision in the run folder, which only the user
  writes, and the config's fingerprint is there);
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
import time
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from sf_hydra.app.ranks import RANKS_DIR, RECORD, Ranks, Rendezvous, free_port, node_name, recorded_rank_end
from sf_hydra.app.topology import group
from sf_hydra.app.topology.folder import acted_on, write_start
from sf_hydra.app.topology.local import resolved, start_local_ranks
from sf_hydra.app.topology.start import NEW, RESUME, RunStart
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


def test_the_run_store_listens_on_master_addr_alone():
    port = free_port()
    store = group.serve("127.0.0.1", port, 10.0)
    try:
        addresses = listening_addresses(port)
    finally:
        del store
    assert addresses == {"127.0.0.1"}  # not 0.0.0.0 / :: (every interface of the machine)


def test_a_port_in_use_fails_rank_0_naming_master_port():
    port = free_port()
    first = group.serve("127.0.0.1", port, 10.0)
    with pytest.raises(RankFailed) as refused:
        group.serve("127.0.0.1", port, 10.0)
    del first
    assert f"MASTER_ADDR=127.0.0.1 MASTER_PORT={port}" in str(refused.value)
    assert "pick a free MASTER_PORT" in str(refused.value)


def test_a_start_that_is_not_the_run_folders_is_never_acted_on(tmp_path):
    """What comes over the process group (a stranger at MASTER_PORT may have joined it) only names the decision a
    rank > 0 acts on: rank 0's, in the run folder, which must equal it."""
    run_dir, where = tmp_path / "run", Rendezvous("127.0.0.1", 29500, 1).at()
    real = RunStart(NEW, session=uuid.uuid4().hex, config={"sha256": "0" * 64, "keys": {}})
    write_start(run_dir, real)
    assert acted_on(run_dir, real, "learner rank 1 on node b", where) == real
    evil = str(tmp_path / "evil.ckpt")
    with pytest.raises(RankFailed) as refused:  # rank 0's start, another checkpoint
        acted_on(run_dir, replace(real, kind=RESUME, checkpoint=evil), "learner rank 1 on node b", where)
    said = str(refused.value)
    assert "not the one in learner rank 0's run folder" in said and "MASTER_PORT=29500" in said, said
    with pytest.raises(RankFailed) as refused:  # a start of its own: no decision of it in the folder
        acted_on(run_dir, RunStart(RESUME, checkpoint=evil, session=uuid.uuid4().hex),
                 "learner rank 1 on node b", where, wait_sec=1.0)
    assert "does not see learner rank 0's run folder" in str(refused.value)


def test_a_stranger_at_master_port_reads_no_config_and_no_decision(tmp_path):
    """Two nodes of one rank each, on this machine (loopback), train one run while a stranger reads every key of
    their store: no config, no run folder, no checkpoint, no decision travels there."""
    from torch.distributed import TCPStore

    port, train_dir = free_port(), tmp_path / "train"
    env = {name: value for name, value in env_with_repo().items() if name not in VARIABLES}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    command = [sys.executable, str(REPO / "train.py"), "env=gym/cartpole", "hardware.num_nodes=2",
               "hardware.num_workers=1", f"train_dir={train_dir}", "train_for_env_steps=6000", "algo.rollout=32",
               "algo.batch_size=256", "algo.num_batches_per_epoch=2", "hardware.ddp_timeout_sec=60"]
    logs = [tmp_path / f"node{n}.out" for n in (0, 1)]
    nodes = [subprocess.Popen(command, cwd=REPO, env=dict(env, NODE_RANK=str(n)), stdout=open(logs[n], "w"),
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL) for n in (1, 0)][::-1]
    seen = {}
    try:
        while any(node.poll() is None for node in nodes):
            try:
                stranger = TCPStore("127.0.0.1", port, None, False, timeout=timedelta(seconds=2))
                seen.update(zip(stranger.list_keys(), stranger.multi_get(stranger.list_keys())))
            except Exception:  # not served yet, or served no more
                time.sleep(0.2)
        codes = [node.wait(timeout=240) for node in nodes]
    finally:
        for node in nodes:
            node.kill() if node.poll() is None else None
    outs = [log.read_text() for log in logs]
    assert codes == [0, 0], f"node 0:\n{outs[0][-3000:]}\nnode 1:\n{outs[1][-3000:]}"
    assert (train_dir / "cartpole" / "summary.json").is_file()
    assert seen, "the stranger never read the store"
    values = b"\n".join(seen.values())
    for secret in (str(tmp_path).encode(), b"checkpoint", b"hardware", b"cartpole", b"session"):
        assert secret not in values, (secret, seen)


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
