"""The sampler allocates for the general case: Dict observations with an image and a
vector key, MultiDiscrete and Box actions, through a real (serial) training."""

import pytest

from sf_hydra.app.train import train
from tests.conftest import make_cfg


@pytest.mark.slow
def test_dict_observations_and_multidiscrete_actions_learn(tmp_path):
    cfg = make_cfg(tmp_path, "env=gym/any", "env.id=tests.helpers.space_envs:DictObs-v0", "hardware.serial_mode=true",
                   "model.encoder_conv_mlp_layers=[32]", "algo.learning_rate=0.003", "train_for_env_steps=15000")
    summary = train(cfg)
    assert summary["env_steps"] >= 15000
    # Random play scores 10 of 20; the vector key tells the right first action.
    assert summary["avg_return"] > 13, summary


@pytest.mark.slow
def test_box_actions_train(tmp_path):
    cfg = make_cfg(tmp_path, "env=gym/any", "env.id=Pendulum-v1", "hardware.serial_mode=true",
                   "train_for_env_steps=4000")
    summary = train(cfg)
    assert summary["env_steps"] >= 4000 and summary["episodes"] >= 1
