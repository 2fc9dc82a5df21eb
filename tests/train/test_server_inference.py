"""Training with hardware.inference=server (batched inference processes on the CPU) behaves as
with the policy in the workers: synchronous PPO acts with the newest weights only, stale
experience is dropped at max_policy_lag, CartPole learns; the profile counts the workers' wait
for answers as inference."""

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.config import validate
from sf_hydra.core.errors import ConfigError
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg

SERVER = ("hardware.inference=server", "hardware.worker_num_splits=2", "hardware.num_envs_per_worker=4")


@pytest.mark.slow
def test_sync_ppo_with_a_server_acts_with_the_newest_weights_only(tmp_path):
    summary = train(make_cfg(tmp_path, *SERVER, "algo=ppo", "train_for_env_steps=6000"))
    assert summary["env_steps"] >= 6000 and summary["policy_version"] >= 5
    assert summary["profile"]["workers"]["inference"]["seconds"] > 0
    assert max(s.value for s in read_scalars(tmp_path / "test")["policy_lag/max"]) == 0.0


@pytest.mark.slow
def test_experience_older_than_max_policy_lag_is_dropped_with_a_server(tmp_path):
    cfg = make_cfg(tmp_path, *SERVER, "algo.num_epochs=8", "algo.num_batches_to_accumulate=4",
                   "algo.max_policy_lag=1", "train_for_env_steps=15000")
    train(cfg)
    scalars = read_scalars(tmp_path / "test")
    assert scalars["learner/dropped_trajectories_total"][-1].value > 0
    assert max(s.value for s in scalars["policy_lag/max"]) <= 1.0


@pytest.mark.slow
def test_cartpole_learns_with_two_inference_servers(tmp_path):
    summary = train(make_cfg(tmp_path, *SERVER, "hardware.num_envs_per_worker=8", "hardware.inference_workers=2",
                             "train_for_env_steps=40000"))
    assert summary["avg_return"] > 50, summary["avg_return"]  # random play: ~22; measured 150-290 here


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_the_gpu_preset_is_refused_without_cuda(tmp_path):
    with pytest.raises(ConfigError, match=r"hardware\.(inference_)?device.*no CUDA device"):
        validate(make_cfg(tmp_path, "hardware=gpu"))


@pytest.mark.gpu
@pytest.mark.parametrize("acting", [("hardware=gpu",), ("hardware.device=cuda",)], ids=["gpu_preset", "in_worker"])
def test_a_cuda_learner_trains_cartpole(tmp_path, acting):
    """The gpu preset (learner and inference server on CUDA) and a CUDA learner with acting in the workers."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    summary = train(make_cfg(tmp_path, *acting, "hardware.num_workers=2", "train_for_env_steps=40000"))
    assert summary["avg_return"] > 50, summary["avg_return"]
    assert summary["profile"]["learner"]["to_device"]["seconds"] > 0
