"""A data-parallel run across two hosts: `hardware.num_nodes=2 hardware.devices=1` through `hydra/launcher=slurm` on
the two namespace nodes of `cluster/slurm/start.sh --two-nodes` (partition two_nodes, nodes sfn1 and sfn2, each its
own network namespace and hostname, joined by a bridge: cluster/slurm/netns.sh). One job of two tasks, a rank on
each node, as one run; the ranks' gloo connections run over the nodes' veth addresses, not loopback."""

from __future__ import annotations

import json
import os

import pytest
import torch

from tests.conftest import REPO_ROOT
from tests.ddp.test_two_ranks import _same
from tests.slurm.conftest import NODES, PARTITION

STATE = "tests.helpers.rank_state.WriteRankState"
SOCKETS = "tests.helpers.rank_sockets.WriteRankSockets"


@pytest.mark.slow  # ~1 min: a two-node job on the local cluster
def test_two_nodes_train_one_run_over_the_veth_link(two_nodes, sweep, tmp_path, monkeypatch):
    # The callbacks below live in tests/: the job's Python finds them through PYTHONPATH (sbatch exports it).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    states = tmp_path / "states"
    code = sweep.run("hardware.num_nodes=2", "hardware.devices=1", "hardware.num_workers=1",
                     "train_for_env_steps=4000", f"hydra.launcher.partition={PARTITION}",
                     f"+callbacks.rank_state._target_={STATE}", f"+callbacks.rank_state.directory={states}",
                     f"+callbacks.rank_sockets._target_={SOCKETS}", f"+callbacks.rank_sockets.directory={states}",
                     timeout=300)
    assert code == 0, sweep.output[-3000:]

    # One run folder, whose files rank 0 wrote; both ranks' frames counted (128 per rank and learner step).
    assert sorted(p.name for p in sweep.dir.iterdir() if p.is_dir() and not p.name.startswith(".")) == ["run"]
    run = sweep.dir / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= 4000 and summary["env_steps"] == 2 * 128 * summary["policy_version"], summary
    assert (run / "train.log").read_text().count("run folder ") == 1

    # A rank on each node (rank 0 on the job's first node), each saying which interface gloo uses.
    sockets = [json.loads((states / f"sockets_rank_{r}.json").read_text()) for r in (0, 1)]
    assert [s["hostname"] for s in sockets] == ["sfn1", "sfn2"], sockets
    for r, log in enumerate([run / "train.log", run / "ranks" / "rank_1.log"]):
        me, other = ("sfn1", "sfn2")[r], ("sfn2", "sfn1")[r]
        assert f"learner rank {r} on node {me}: gloo over sfh0 ({NODES[me]}), the interface that reaches node " \
               f"{other} ({NODES[other]})" in log.read_text()

    # Gloo over the veth link: each rank's connections other than the TCP store's run between the two nodes'
    # bridge addresses; none is on loopback.
    for r, s in enumerate(sockets):
        me, other = NODES[s["hostname"]], NODES[sockets[1 - r]["hostname"]]
        assert s["gloo_socket_ifname"] == "sfh0", s
        gloo = [c for c in s["connections"] if s["master_port"] not in (c[1], c[3])]
        assert gloo, f"rank {r} holds no connection besides the store's: {s}"
        assert all(c[0] == me and c[2] == other for c in gloo), f"rank {r}'s gloo connections: {s}"

    # Every rank's learner state bit-identical at the end, and equal to the checkpoint rank 0 wrote.
    rank0, rank1 = (torch.load(states / f"rank_{r}.pt", weights_only=False) for r in (0, 1))
    assert _same(rank0, rank1) == [], "the ranks' learner states differ"
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert _same(ckpt["state_dict"], rank0["weights"]) == []
    assert _same(ckpt["optimizer_states"], rank0["optimizers"]) == []
    assert ckpt["sf_hydra"]["env_steps"] == summary["env_steps"] == rank1["sf_hydra"]["env_steps"]
