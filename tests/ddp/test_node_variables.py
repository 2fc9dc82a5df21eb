"""Where a process stands in a run on several machines without Slurm (torchrun's convention, ranks.ranks_of):
MASTER_ADDR, MASTER_PORT and NODE_RANK give node n's process global rank n x devices; what is missing or
inconsistent is refused by the variable's name and value before any process starts (tests/ddp/test_torchrun_nodes.py
runs such a run across two hosts)."""

import json
import subprocess
import sys

import pytest

from sf_hydra.app.ranks import Ranks, env_rendezvous, ranks_of
from sf_hydra.config import ConfigError
from tests.conftest import make_cfg
from tests.faults.runs import REPO, env_with_repo

VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
             "TORCHELASTIC_RUN_ID", "GROUP_RANK", "LOCAL_WORLD_SIZE")


@pytest.fixture
def env(monkeypatch):
    """A clean environment of rendezvous variables, set by the test."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def set_(**values):
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_


def test_node_n_is_its_first_ranks_and_starts_the_others(env):
    env(MASTER_ADDR="10.0.0.1", MASTER_PORT="29500", NODE_RANK="1")
    assert ranks_of(3, 2) == Ranks(6, 3, 0, False, via_env=True, node_rank=1)
    assert ranks_of(3, 2).starts_node and not ranks_of(3, 2).is_zero
    env(LOCAL_RANK="2", WORLD_SIZE="6")  # a rank that node's process started (ranks.start_local_ranks)
    assert ranks_of(3, 2) == Ranks(6, 5, 2, False, via_env=True, node_rank=1)
    assert not ranks_of(3, 2).starts_node
    assert env_rendezvous(3, 2).address == "10.0.0.1" and env_rendezvous(3, 2).port == 29500


def test_one_node_needs_no_rendezvous(env):
    assert ranks_of(2, 1) == Ranks(2, 0, 0, False)
    env(NODE_RANK="0")
    assert not ranks_of(2, 1).via_env


@pytest.mark.parametrize(("values", "key", "value"), [
    ({"MASTER_PORT": "29500", "NODE_RANK": "0"}, "hardware.num_nodes", 2),  # no MASTER_ADDR
    ({"MASTER_ADDR": "h", "NODE_RANK": "0"}, "hardware.num_nodes", 2),  # no MASTER_PORT
    ({}, "hardware.num_nodes", 2),  # neither Slurm nor torchrun's convention
    ({"MASTER_ADDR": "h", "MASTER_PORT": "29500", "NODE_RANK": "2"}, "NODE_RANK", "2"),
    ({"MASTER_ADDR": "h", "MASTER_PORT": "29500", "NODE_RANK": "-1"}, "NODE_RANK", "-1"),
    ({"MASTER_ADDR": "h", "MASTER_PORT": "29500", "NODE_RANK": "one"}, "NODE_RANK", "one"),
    ({"MASTER_ADDR": "h", "MASTER_PORT": "http", "NODE_RANK": "0"}, "MASTER_PORT", "http"),
    ({"MASTER_ADDR": "h", "MASTER_PORT": "70000", "NODE_RANK": "0"}, "MASTER_PORT", "70000"),
    ({"MASTER_ADDR": "h", "MASTER_PORT": "29500", "NODE_RANK": "0", "WORLD_SIZE": "4"}, "WORLD_SIZE", "4"),
    ({"MASTER_ADDR": "h", "MASTER_PORT": "29500", "NODE_RANK": "0", "LOCAL_RANK": "1"}, "LOCAL_RANK", "1"),
])
def test_missing_or_inconsistent_variables_are_refused_by_name(env, values, key, value):
    env(**values)
    with pytest.raises(ConfigError) as refused:
        ranks_of(1, 2)
    assert (refused.value.key, refused.value.value) == (key, value)
    if key == "hardware.num_nodes":
        said = str(refused.value)
        assert "hydra/launcher=slurm" in said and "MASTER_ADDR" in said and "NODE_RANK" in said


TORCHRUN = {"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "h", "MASTER_PORT": "29500"}


def test_a_torchrun_worker_stands_where_torchrun_says(env):
    env(**TORCHRUN, RANK="3", LOCAL_RANK="1", GROUP_RANK="1", WORLD_SIZE="4", LOCAL_WORLD_SIZE="2")
    place = ranks_of(2, 2)
    assert place == Ranks(4, 3, 1, False, node_rank=1, via_torchrun=True)
    assert not place.starts_node  # torchrun started every rank: none starts another


@pytest.mark.parametrize(("devices", "nodes", "world", "local_world", "key"), [
    (2, 1, "4", "2", "hardware.num_nodes"),  # WORLD_SIZE is not devices x num_nodes
    (1, 2, "4", "2", "hardware.devices"),  # LOCAL_WORLD_SIZE (--nproc-per-node) is not devices
    (2, 1, "2", "1", "hardware.devices"),
])
def test_hardware_keys_that_contradict_torchrun_are_refused_by_name(env, devices, nodes, world, local_world, key):
    env(**TORCHRUN, RANK="0", LOCAL_RANK="0", GROUP_RANK="0", WORLD_SIZE=world, LOCAL_WORLD_SIZE=local_world)
    with pytest.raises(ConfigError) as refused:
        ranks_of(devices, nodes)
    assert refused.value.key == key and ("WORLD_SIZE" in str(refused.value)), str(refused.value)


def test_train_py_refuses_them_before_it_writes_anything(tmp_path):
    env = dict(env_with_repo(), MASTER_ADDR="127.0.0.1", MASTER_PORT="29500", NODE_RANK="2")
    for name in ("WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, str(REPO / "train.py"), "hardware.num_nodes=2", f"train_dir={tmp_path}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "bad config: NODE_RANK" in proc.stderr and "2" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []  # no run folder, no Hydra files


def test_a_machine_running_another_command_is_refused_naming_the_key(tmp_path):
    from sf_hydra.app.ranks import config_fingerprint, same_config

    node_0 = config_fingerprint(make_cfg(tmp_path, "hardware.num_nodes=2", "seed=1"))
    assert json.loads(json.dumps(node_0)) == node_0  # it travels in ranks/start.json
    same_config(make_cfg(tmp_path, "hardware.num_nodes=2", "seed=1"), node_0, "learner rank 1 on node b")
    with pytest.raises(ConfigError) as refused:
        same_config(make_cfg(tmp_path, "hardware.num_nodes=2", "seed=2"), node_0, "learner rank 1 on node b")
    assert (refused.value.key, refused.value.value) == ("seed", 2)
    assert "node 0's value differs (learner rank 1 on node b runs another command" in str(refused.value)


def test_a_config_that_differs_where_no_key_says_so_is_refused_naming_its_hash(tmp_path):
    from sf_hydra.app.ranks import config_fingerprint, same_config

    node_0 = config_fingerprint(make_cfg(tmp_path, "hardware.num_nodes=2"))
    node_0["sha256"] = "0" * 64  # the keys agree, the whole does not (an empty group on one side)
    with pytest.raises(ConfigError) as refused:
        same_config(make_cfg(tmp_path, "hardware.num_nodes=2"), node_0, "learner rank 1 on node b")
    assert refused.value.key == "config sha256" and "0" * 64 in str(refused.value)
    assert "run the same command" in str(refused.value)


@pytest.mark.parametrize("node_rank, said", [
    (0, "learner rank 0 on node {host}: not all 2 learner ranks joined the run at MASTER_ADDR=127.0.0.1 "
        "MASTER_PORT={port} within hardware.ddp_timeout_sec=5 s"),
    (1, "learner rank 1 on node {host}: no learner rank 0 at MASTER_ADDR=127.0.0.1 MASTER_PORT={port} within "
        "hardware.ddp_timeout_sec=5 s"),
])
def test_a_machine_whose_others_never_come_says_so_within_the_timeout(tmp_path, node_rank, said):
    """One machine's command alone (the other never started): it ends within hardware.ddp_timeout_sec, naming the
    rendezvous and what to start, never hanging."""
    from sf_hydra.app.ranks import free_port, node_name

    port = free_port()
    env = {name: value for name, value in env_with_repo().items() if name not in VARIABLES}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NODE_RANK=str(node_rank))
    proc = subprocess.run([sys.executable, str(REPO / "train.py"), "env=gym/cartpole", "hardware.num_nodes=2",
                           "hardware.num_workers=1", "hardware.ddp_timeout_sec=5", f"train_dir={tmp_path}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert said.format(host=node_name(), port=port) in out, out[-3000:]
    assert ("start the same command on every machine" if node_rank == 0 else "start the same command with NODE_RANK=0"
            ) in out, out[-3000:]
