"""hardware.batched_sampling=true: each split of a worker's envs is one vector env (the
env's own vectorized version, gymnasium's SyncVectorEnv, or EnvPool), stepped as one
batch, through the real sampler. "Next step" autoreset (CartPole's numpy vector env,
EnvPool) spends one step per done on the reset alone: that step must not be recorded."""

import importlib.util
import sys

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.core.errors import ConfigError
from sf_hydra.sampler.vector_envs import check_batched_sampling, make_vector_env
from tests.conftest import make_cfg
from tests.sampler.collect import collect

BATCHED = ("hardware.batched_sampling=true",)
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None


def _check_cartpole_rows(got) -> None:
    """Every recorded step is a real CartPole step (reward 1; a reset-only step has 0), and
    after each done the next recorded observation starts a new episode (|state| <= 0.05)."""
    b = got.batch
    assert b["obs.obs"].shape[1:] == (16, 4)
    assert (b["rewards"] == 1.0).all(), "a reset-only step was recorded"
    dones = b["dones"][:, :-1].bool()
    assert dones.sum() >= 5
    first_obs = b["obs.obs"][:, 1:][dones]
    assert (first_obs.abs() <= 0.05).all()
    assert all(e.ret == e.length for e in got.episodes) and got.episodes


def test_cartpole_uses_its_numpy_vector_env(tmp_path):
    cfg = make_cfg(tmp_path, *BATCHED)
    vector = make_vector_env(cfg.env, cfg.hardware.vector_backend, 8, seed=0)
    assert type(vector.env).__name__ == "CartPoleVectorEnv" and vector.resets_next_step
    assert vector.observation_space.shape == (4,) and vector.env.num_envs == 8
    vector.env.close()


def test_native_vector_env_records_no_reset_steps(tmp_path):
    _check_cartpole_rows(collect(make_cfg(tmp_path, *BATCHED, "hardware.num_workers=1", "hardware.worker_num_splits=2"),
                                 min_slots=64))


@pytest.mark.skipif(not HAS_ENVPOOL, reason="the envpool extra is not installed")
def test_envpool_backend_records_no_reset_steps(tmp_path):
    _check_cartpole_rows(collect(make_cfg(tmp_path, *BATCHED, "hardware.num_workers=1",
                                          "hardware.vector_backend=envpool"), min_slots=64))


def test_sync_vector_env_with_dict_obs_and_multidiscrete_actions(tmp_path):
    cfg = make_cfg(tmp_path, *BATCHED, "hardware.vector_backend=sync", "env=gym/any",
                   "env.id=tests.helpers.space_envs:DictObs-v0", "model.encoder_conv_mlp_layers=[32]",
                   "hardware.num_workers=1")
    b = collect(cfg, min_slots=8).batch
    assert b["obs.image"].shape[1:] == (16, 3, 36, 36) and b["obs.vec"].shape[1:] == (16, 4)
    assert b["actions"].shape[1:] == (16, 2)
    # The env pays 1 when the first action component is the sign of vec[0].
    torch.testing.assert_close(b["rewards"], (b["actions"][..., 0] == (b["obs.vec"][..., 0] > 0).long()).float())


@pytest.mark.slow
@pytest.mark.parametrize("serial", [False, True], ids=["processes", "serial"])
def test_batched_cartpole_trains(tmp_path, serial):
    summary = train(make_cfg(tmp_path, *BATCHED, f"hardware.serial_mode={serial}", "train_for_env_steps=6000"))
    assert summary["env_steps"] >= 6000 and summary["episodes"] > 0 and summary["policy_version"] > 0


@pytest.mark.slow
def test_box_actions_through_sync_vector_env(tmp_path):
    cfg = make_cfg(tmp_path, *BATCHED, "env=gym/any", "env.id=Pendulum-v1", "hardware.serial_mode=true",
                   "train_for_env_steps=3000")
    summary = train(cfg)
    assert summary["env_steps"] >= 3000 and summary["episodes"] >= 1


# -- bad settings fail before any process starts ----------------------------------------------


def test_unknown_backend_is_rejected(tmp_path):
    """The backends are what the env family offers besides auto and sync (gym: envpool)."""
    allowed = r"hardware.vector_backend='fast' is not allowed: one of \['auto', 'sync', 'envpool'\]"
    with pytest.raises(ConfigError, match=allowed):
        check_batched_sampling(make_cfg(tmp_path, *BATCHED, "hardware.vector_backend=fast"))
    with pytest.raises(ConfigError, match=r"one of \['auto', 'sync'\] \(what the 'doom' env family offers\)"):
        check_batched_sampling(make_cfg(tmp_path, *BATCHED, "hardware.vector_backend=envpool", "env=doom/basic"))


def test_envpool_needs_batched_sampling_and_a_gym_id(tmp_path):
    with pytest.raises(ConfigError, match="hardware.batched_sampling=true"):
        check_batched_sampling(make_cfg(tmp_path, "hardware.vector_backend=envpool"))
    with pytest.raises(ConfigError, match="'doom' env family"):
        check_batched_sampling(make_cfg(tmp_path, *BATCHED, "hardware.vector_backend=envpool", "env=doom/basic"))


@pytest.mark.skipif(not HAS_ENVPOOL, reason="the envpool extra is not installed")
def test_envpool_unknown_task_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="env.id=.*an EnvPool task"):
        check_batched_sampling(make_cfg(tmp_path, *BATCHED, "hardware.vector_backend=envpool", "env=gym/any",
                                        "env.id=tests.helpers.space_envs:DictObs-v0"))


def test_envpool_missing_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # what `import envpool` sees when it is not installed
    with pytest.raises(ConfigError, match="envpool is not installed"):
        train(make_cfg(tmp_path, *BATCHED, "hardware.vector_backend=envpool"))


def test_batched_sampling_of_a_multi_agent_env_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="hardware.batched_sampling=True.*multi-agent env"):
        train(make_cfg(tmp_path, *BATCHED, "env=gym/multi_agent_toy"))
