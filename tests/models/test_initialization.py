"""model.policy_init_gain and model.action_head_init_gain, from the definition of an orthogonal
initialization: a weight matrix with fewer rows than columns gets orthonormal rows times the gain."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.models import build_model, model_recipe

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3)))


def head_weights(model):
    return [m.weight.detach() for m in model.action_head.modules() if isinstance(m, torch.nn.Linear)]


@pytest.mark.parametrize("gain", [0.01, 1.0, 2.5])
def test_action_head_rows_are_orthonormal_times_its_gain(tmp_cfg, gain):
    recipe = model_recipe(tmp_cfg(f"model.action_head_init_gain={gain}", "model.policy_init_gain=1.7"))
    model = build_model(recipe, OBS, ACTIONS)
    (w,) = head_weights(model)  # one linear layer for both sub-actions' logits: 6 x 64
    assert w.shape == (6, 64)
    torch.testing.assert_close(w @ w.T, gain**2 * torch.eye(6), atol=1e-5 * max(gain**2, 1), rtol=1e-4)
    # The other layers keep policy_init_gain: the value head (1 x 64) has one row of norm 1.7.
    assert float(model.value_head.weight.norm()) == pytest.approx(1.7, rel=1e-5)


def test_a_small_head_gain_starts_near_uniform_and_a_large_one_does_not(tmp_cfg):
    obs = {"obs": torch.rand(256, 1, 4) * 2 - 1}
    actions, dones = torch.zeros(256, 1, 2, dtype=torch.long), torch.zeros(256, 1)
    uniform = 2 * np.log(3)  # the entropy of two uniform 3-way choices
    entropies = {}
    for gain in (0.01, 4.0):
        torch.manual_seed(0)
        recipe = model_recipe(tmp_cfg(f"model.action_head_init_gain={gain}", "model.use_rnn=false"))
        model = build_model(recipe, OBS, ACTIONS)
        with torch.no_grad():
            entropies[gain] = float(model.evaluate(obs, actions, None, dones)[1].mean())
    assert entropies[0.01] == pytest.approx(uniform, abs=1e-3)
    assert entropies[4.0] < uniform - 0.05


def test_zero_head_gain_gives_zero_logits(tmp_cfg):
    model = build_model(model_recipe(tmp_cfg("model.action_head_init_gain=0")), OBS, ACTIONS)
    assert all(float(w.abs().max()) == 0.0 for w in head_weights(model))
