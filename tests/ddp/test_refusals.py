"""What data-parallel training does not support is refused by name, before any process starts."""

import pytest

from sf_hydra.app.train import train
from sf_hydra.config import ConfigError, validate
from tests.conftest import make_cfg


@pytest.mark.parametrize(("overrides", "key"), [
    (["algo.num_policies=2"], "algo.num_policies"),
    (["pbt.with_pbt=true", "pbt.workspace=ws", "pbt.member=0"], "pbt.with_pbt"),
    (["selfplay.pool_size=2"], "selfplay.pool_size"),
    (["eval.every_env_steps=20000"], "eval.every_env_steps"),
    (["hardware.reproducible=true", "hardware.serial_mode=true"], "hardware.reproducible"),
    (["hardware.serial_mode=true"], "hardware.serial_mode"),
    (["hardware.devices=0"], "hardware.devices"),
])
def test_unsupported_combinations_are_refused_by_name(tmp_path, overrides, key):
    devices = [] if key == "hardware.devices" else ["hardware.devices=2"]
    cfg = make_cfg(tmp_path, *devices, *overrides)
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    assert refused.value.key == key


def test_several_nodes_need_slurm(tmp_path, monkeypatch):
    for name in ("SLURM_PROCID", "SLURM_NTASKS", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    cfg = make_cfg(tmp_path, "hardware.devices=1", "hardware.num_nodes=2")
    with pytest.raises(ConfigError) as refused:
        train(cfg)
    assert refused.value.key == "hardware.num_nodes"
    assert not (tmp_path / "test").exists()  # nothing written, no sampler started


def test_slurm_tasks_must_match_the_ranks(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "3")
    cfg = make_cfg(tmp_path, "hardware.devices=2")
    with pytest.raises(ConfigError) as refused:
        train(cfg)
    assert refused.value.key == "hardware.devices" and "tasks_per_node" in str(refused.value)
    assert not (tmp_path / "test").exists()
