"""A data-parallel run across two hosts without Slurm: by torchrun itself (`torchrun --nnodes=2 --rdzv-backend=c10d
--rdzv-endpoint=<host 0>:<port> train.py ...` on each host, elastic restarts included), and by torchrun's convention:
the same `python train.py hardware.num_nodes=2 hardware.devices=2 ...` on each host, with MASTER_ADDR (node 0's
address), MASTER_PORT and its own NODE_RANK. The hosts are the two network namespaces of
`cluster/slurm/start.sh --two-nodes` (sfh-sfn1 at 10.87.0.2, sfh-sfn2 at 10.87.0.3, joined by a bridge:
cluster/slurm/netns.sh), each command entered with its own hostname; the filesystem is shared, as a cluster's is.
Without the namespaces (README's install) these tests skip, saying why."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import pytest
import torch

from tests.ddp.test_two_ranks import _same
from tests.faults.runs import REPO, env_with_repo

NODES = {"sfn1": "10.87.0.2", "sfn2": "10.87.0.3"}  # cluster/slurm/netns.sh: each namespace's address on the bridge
STATE = "tests.helpers.rank_state.WriteRankState"
SOCKETS = "tests.helpers.rank_sockets.WriteRankSockets"
RUN = ("env=gym/cartpole", "hardware.num_nodes=2", "hardware.devices=2", "hardware.num_workers=1")


@pytest.fixture
def two_hosts():
    missing = [n for n in NODES if not Path(f"/run/netns/sfh-{n}").exists()]
    if missing:
        pytest.skip(f"no network namespace {', '.join('sfh-' + n for n in missing)}: start the two-node cluster with "
                    "cluster/slurm/start.sh --two-nodes")
    if os.geteuid() != 0 or not (shutil.which("nsenter") and shutil.which("unshare")):
        pytest.skip("entering the nodes' namespaces needs root, nsenter and unshare")


def on_node(node: str, node_rank: int, port: int, overrides, log: Path, hide: Path | None = None,
            launcher: Sequence[str] = (), run: Sequence[str] = RUN) -> subprocess.Popen:
    """`python train.py RUN overrides` on host `node`: in its network namespace, with its hostname (a UTS namespace
    of its own; not `ip netns exec`, which remounts /sys) and torchrun's variables. `hide`: a folder this host does
    not share (a mount namespace with an empty tmpfs over it), as a host without the shared filesystem. `launcher`:
    torchrun and its arguments, which then start train.py (and set the variables themselves)."""
    env = dict(env_with_repo(), MASTER_ADDR=NODES["sfn1"], MASTER_PORT=str(port), NODE_RANK=str(node_rank))
    for name in ("GLOO_SOCKET_IFNAME", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID",
                 *(("MASTER_ADDR", "MASTER_PORT", "NODE_RANK") if launcher else ())):
        env.pop(name, None)
    enter = f"mount -t tmpfs none {hide} && " if hide else ""
    cmd = ["nsenter", f"--net=/run/netns/sfh-{node}", "unshare", "--uts", *(["--mount"] if hide else []),
           "sh", "-c", f'{enter}hostname {node} && exec "$@"', "sh",
           *(launcher or [sys.executable]), str(REPO / "train.py"), *run, *overrides]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def run_on_both(tmp_path, overrides, timeout: float, hide_on_node_1: Path | None = None):
    """Node 1's command first (it waits for rank 0), then node 0's; both awaited (killed after `timeout`).
    Returns ([node 0's exit code, node 1's], [their output])."""
    port = random.randint(40000, 49999)  # in the nodes' namespaces, which only these tests and Slurm's jobs use
    logs = [tmp_path / f"node{n}.out" for n in (0, 1)]
    procs = [on_node("sfn2", 1, port, overrides, logs[1], hide_on_node_1),
             on_node("sfn1", 0, port, overrides, logs[0])]
    procs.reverse()
    return await_both(procs, logs, timeout)


def test_the_several_hosts_recipe_makes_these_hosts():
    """docs/guides/several-hosts.md, "Several hosts on one machine": the namespaces, addresses and hostnames it makes
    and enters are the ones these tests look for, and its run meets at host sfn1's address."""
    text = (REPO / "docs" / "guides" / "several-hosts.md").read_text()
    recipe = text[text.index("## Several hosts on one machine"):]
    for node, address in NODES.items():
        assert f"ip netns add sfh-{node}" in recipe and f"ip netns del sfh-{node}" in recipe, node
        assert f"ip -n sfh-{node} addr add {address}/24 dev sfh0" in recipe, node
        assert f"--net=/run/netns/sfh-{node} unshare --uts sh -c 'hostname {node} && exec" in recipe, node
    assert recipe.count(f"MASTER_ADDR={NODES['sfn1']} ") == 2, recipe


@pytest.mark.slow  # ~2 min: four learner ranks, two per host, and a rerun
def test_two_hosts_train_one_run_by_torchruns_convention(two_hosts, tmp_path):
    states, train_dir = tmp_path / "states", tmp_path / "train"
    # 2 x 256 frames per rank and step on rollouts of 32: a step's batch is then whole messages of the rank's workers.
    # env_steps counts a worker's message (its envs' trajectories) when it arrives (sampler/training_batches.py), and
    # the trajectories a step does not take wait for the next: with CartPole's own 1 x 1024 on rollouts of 64 a
    # message outgrows a 256-frame batch and env_steps runs ahead of ranks x batch x policy_version.
    command = [f"train_dir={train_dir}", "train_for_env_steps=6000", "algo.batch_size=256",
               "algo.num_batches_per_epoch=2", "algo.rollout=32",
               f"+callbacks.rank_state._target_={STATE}", f"+callbacks.rank_state.directory={states}",
               f"+callbacks.rank_sockets._target_={SOCKETS}", f"+callbacks.rank_sockets.directory={states}"]
    codes, outs = run_on_both(tmp_path, command, timeout=300)
    assert codes == [0, 0], f"node 0:\n{outs[0][-3000:]}\nnode 1:\n{outs[1][-3000:]}"

    # One run folder, whose files rank 0 wrote; every rank's frames counted (2 x 256 per rank and learner step).
    assert sorted(p.name for p in train_dir.iterdir()) == ["cartpole"]
    run = train_dir / "cartpole"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= 6000 and summary["env_steps"] == 4 * 512 * summary["policy_version"], summary
    assert (run / "train.log").read_text().count("run folder ") == 1
    assert sorted(p.name for p in (run / "ranks").glob("rank_*.log")) == [f"rank_{r}.log" for r in (1, 2, 3)]

    # Ranks 0, 1 on node 0 (sfn1), ranks 2, 3 on node 1 (sfn2), each giving gloo the veth, which reaches node 0.
    sockets = [json.loads((states / f"sockets_rank_{r}.json").read_text()) for r in range(4)]
    assert [s["hostname"] for s in sockets] == ["sfn1", "sfn1", "sfn2", "sfn2"], sockets
    logs = [run / "train.log", *(run / "ranks" / f"rank_{r}.log" for r in (1, 2, 3))]
    for r, log in enumerate(logs):
        me = sockets[r]["hostname"]
        assert f"learner rank {r} on node {me}: gloo over sfh0 ({NODES[me]}), the interface that reaches " \
               f"MASTER_ADDR {NODES['sfn1']} ({NODES['sfn1']})" in log.read_text(), log

    # Gloo over the veth link: each rank's connections besides the TCP store's run between bridge addresses (its
    # own host's, the other host's), none on loopback, and every rank holds one to the other host.
    for r, s in enumerate(sockets):
        me = NODES[s["hostname"]]
        other = next(a for a in NODES.values() if a != me)
        assert s["gloo_socket_ifname"] == "sfh0", s
        gloo = [c for c in s["connections"] if s["master_port"] not in (c[1], c[3])]
        assert gloo and all(c[0] == me and c[2] in NODES.values() for c in gloo), f"rank {r}'s gloo connections: {s}"
        assert any(c[2] == other for c in gloo), f"rank {r} holds no connection to the other host: {s}"

    # Every rank's learner state bit-identical at the end, and equal to the checkpoint rank 0 wrote.
    ranks = [torch.load(states / f"rank_{r}.pt", weights_only=False) for r in range(4)]
    for r in (1, 2, 3):
        assert _same(ranks[0], ranks[r]) == [], f"rank {r}'s learner state differs from rank 0's"
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert _same(ckpt["state_dict"], ranks[0]["weights"]) == []
    assert _same(ckpt["optimizer_states"], ranks[0]["optimizers"]) == []
    assert ckpt["sf_hydra"]["env_steps"] == summary["env_steps"] == ranks[3]["sf_hydra"]["env_steps"]

    # The same commands again: rank 0 finds the run finished, and node 1 acts on that decision of this start.
    codes, outs = run_on_both(tmp_path, command, timeout=300)
    assert codes == [0, 0], f"node 0:\n{outs[0][-3000:]}\nnode 1:\n{outs[1][-3000:]}"
    assert all(f"run folder {run} is finished" in out for out in outs), outs


@pytest.mark.slow  # ~1.5 min: node 1 looks for the folder for 15 s, rank 0 waits hardware.ddp_timeout_sec for it
def test_a_host_without_the_shared_run_folder_is_told_so(two_hosts, tmp_path):
    train_dir = tmp_path / "train"
    train_dir.mkdir()
    codes, outs = run_on_both(tmp_path, [f"train_dir={train_dir}", "hardware.ddp_timeout_sec=20"], timeout=240,
                              hide_on_node_1=train_dir)
    assert codes[1] == 1, outs[1][-3000:]
    assert f"learner rank 2 on node sfn2 does not see learner rank 0's run folder {train_dir / 'cartpole'}" in outs[1]
    assert "needs train_dir on a filesystem every machine shares" in outs[1]
    # Rank 0 names the ranks that never joined, and the machine they were to run on.
    assert codes[0] == 1, outs[0][-3000:]
    assert "the run stopped: learner ranks 2, 3 never joined this start" in outs[0], outs[0][-3000:]
    assert "on the machine with NODE_RANK=1" in outs[0]


def torchrun_on_both(tmp_path, overrides, port: int, restarts: int = 0):
    """torchrun on both hosts, one worker each (one core each), meeting at host sfn1's c10d rendezvous; returns
    their processes (torchrun's agents) and logs."""
    found = shutil.which("torchrun") or pytest.skip("torchrun (torch's launcher) is not on PATH")
    launcher = [found, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d", f"--rdzv-id=sfh-{port}",
                f"--rdzv-endpoint={NODES['sfn1']}:{port}", f"--max-restarts={restarts}"]
    logs = [tmp_path / f"node{n}.out" for n in (0, 1)]
    run = ("env=gym/cartpole", "hardware.num_nodes=2", "hardware.devices=1", "hardware.num_workers=1")
    # each host's address and whether it serves the rendezvous, said: torchrun would look up the host's name (in
    # DNS), which these hosts lack
    here = [[f"--local-addr={address}", f"--rdzv-conf=is_host={n == 0}"] for n, address in enumerate(NODES.values())]
    procs = [on_node(node, n, port, overrides, logs[n], launcher=[*launcher, *here[n]], run=run)
             for n, node in enumerate(NODES)]
    return procs, logs


def await_both(procs, logs, timeout: float):
    """Both agents' exit codes (killed after `timeout`) and outputs."""
    codes = []
    try:
        for p in procs:
            codes.append(p.wait(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return codes, [log.read_text() for log in logs]


@pytest.mark.slow  # ~1 min: one worker per host
def test_torchrun_on_two_hosts_trains_one_run(two_hosts, tmp_path):
    states, train_dir = tmp_path / "states", tmp_path / "train"
    command = [f"train_dir={train_dir}", *TORCHRUN_RUN, f"+callbacks.rank_state._target_={STATE}",
               f"+callbacks.rank_state.directory={states}", f"+callbacks.rank_sockets._target_={SOCKETS}",
               f"+callbacks.rank_sockets.directory={states}"]
    codes, outs = await_both(*torchrun_on_both(tmp_path, command, random.randint(40000, 49999)), timeout=240)
    assert codes == [0, 0], f"host sfn1:\n{outs[0][-3000:]}\nhost sfn2:\n{outs[1][-3000:]}"
    assert sorted(p.name for p in train_dir.iterdir()) == ["cartpole"]
    run = train_dir / "cartpole"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 2 * 128 * summary["policy_version"], summary
    assert (run / "train.log").read_text().count("run folder ") == 1
    assert (run / "ranks" / "rank_1.log").is_file()
    sockets = [json.loads((states / f"sockets_rank_{r}.json").read_text()) for r in range(2)]
    assert sorted(s["hostname"] for s in sockets) == ["sfn1", "sfn2"], sockets  # a rank on each host
    ranks = [torch.load(states / f"rank_{r}.pt", weights_only=False) for r in range(2)]
    assert _same(ranks[0], ranks[1]) == [], "rank 1's learner state differs from rank 0's"
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert _same(ckpt["state_dict"], ranks[0]["weights"]) == []


TORCHRUN_RUN = ("hardware.num_envs_per_worker=4", "algo.rollout=32", "algo.batch_size=128",
                "algo.num_batches_per_epoch=1", "train_for_env_steps=4000")


@pytest.mark.slow  # ~1.5 min: two starts of one worker per host
def test_torchrun_on_two_hosts_restarts_after_a_killed_worker_and_resumes(two_hosts, tmp_path):
    from tests.ddp.test_torchrun_one_node import _numbered

    run = tmp_path / "train" / "cartpole"
    command = [f"train_dir={tmp_path / 'train'}", *TORCHRUN_RUN, "train_for_env_steps=10000", "save_every_sec=1",
               "keep_checkpoints=100", "hardware.ddp_timeout_sec=20"]
    procs, logs = torchrun_on_both(tmp_path, command, random.randint(40000, 49999), restarts=1)
    deadline = time.monotonic() + 180
    while not _numbered(run) and all(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.2)
    workers = Path(f"/proc/{procs[1].pid}/task/{procs[1].pid}/children").read_text().split() if _numbered(run) else []
    assert workers, "\n".join(log.read_text()[-2000:] for log in logs)
    killed_at = int(_numbered(run)[-1].stem.split("_")[1])
    os.kill(int(workers[0]), signal.SIGKILL)  # host sfn2's worker
    codes, outs = await_both(procs, logs, timeout=300)
    assert codes == [0, 0], f"host sfn1:\n{outs[0][-3000:]}\nhost sfn2:\n{outs[1][-3000:]}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= 10000 > killed_at, summary
    assert "resuming from" in (run / "train.log").read_text()
    for ckpt in sorted((run / "checkpoints").glob("*.ckpt")):
        torch.load(ckpt, map_location="cpu", weights_only=True)
