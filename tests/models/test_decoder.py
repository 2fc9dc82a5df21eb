"""A non-empty decoder (model.decoder_mlp_layers): an MLP between the core and both heads."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.models import build_model, model_recipe

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def test_decoder_sits_between_core_and_heads(tmp_cfg):
    cfg = tmp_cfg("model.decoder_mlp_layers=[64]", "model.use_rnn=true", "model.rnn_size=16")
    model = build_model(model_recipe(cfg), OBS, gym.spaces.Discrete(2))
    linear = model.decoder[0]
    assert (linear.in_features, linear.out_features) == (16, 64)
    assert model.action_head.linear.in_features == 64 and model.value_head.in_features == 64
    out = model.act({"obs": torch.randn(5, 4)}, torch.zeros(5, 16))
    assert out.actions.shape == (5,) and out.values.shape == (5,) and out.rnn_states.shape == (5, 16)
    log_probs, entropy, values = model.evaluate({"obs": torch.randn(2, 3, 4)}, torch.zeros(2, 3, dtype=torch.long),
                                                torch.zeros(2, 16), torch.zeros(2, 3))
    assert log_probs.shape == entropy.shape == values.shape == (2, 3)
    values.sum().backward()
    assert linear.weight.grad.abs().sum() > 0


def test_decoder_output_is_what_the_heads_read(tmp_cfg):
    model = build_model(model_recipe(tmp_cfg("model.decoder_mlp_layers=[64]")), OBS, gym.spaces.Discrete(2))
    obs = torch.randn(3, 4)
    features = model.decoder(model._features({"obs": obs}))
    assert torch.allclose(model.act({"obs": obs}, None).values, model.value_head(features).squeeze(-1))


@pytest.mark.slow
def test_cartpole_trains_a_few_iterations_with_a_decoder(tmp_cfg):
    summary = train(tmp_cfg("model.decoder_mlp_layers=[64]", "train_for_env_steps=2000", "hardware.serial_mode=true"))
    assert summary["env_steps"] >= 2000 and summary["policy_version"] >= 10
