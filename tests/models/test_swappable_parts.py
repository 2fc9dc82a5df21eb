"""Model parts, the network class and the optimizer are `_target_` nodes: a dotted path in the
config swaps them, and the documented keys (algo.learning_rate, adam_*) still set the optimizer."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.config import ConfigError
from sf_hydra.models import ActorCritic, build_model, model_recipe
from sf_hydra.models.cores import RnnCore
from sf_hydra.models.encoders import MultiKeyEncoder
from tests.helpers.plans import learner_for

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(2)
HERE = __name__


def lstm_core(in_size, model_cfg, size):
    """A user's core: an LSTM whatever model.rnn_type says, sized by its own node key."""
    return RnnCore(in_size, "lstm", size, 1)


class TaggedActorCritic(ActorCritic):
    """A user's network class: ActorCritic's arguments, one attribute more."""

    def __init__(self, obs_shapes, action_space, recipe):
        super().__init__(obs_shapes, action_space, recipe)
        self.tag = "mine"


class NoOutSize(torch.nn.Module):
    def __init__(self, obs_shapes, model_cfg):
        super().__init__()


def test_default_parts(tmp_cfg):
    model = build_model(model_recipe(tmp_cfg("model.use_rnn=true", "model.rnn_size=8")), OBS, ACTIONS)
    assert type(model) is ActorCritic and isinstance(model.encoder, MultiKeyEncoder)
    assert isinstance(model.core, RnnCore) and not model.core.is_lstm and model.core.out_size == 8


def test_core_and_network_by_dotted_path(tmp_cfg):
    cfg = tmp_cfg("model.use_rnn=true", "+model.core.size=6", f"model.core._target_={HERE}.lstm_core",
                  f"model._target_={HERE}.TaggedActorCritic")
    model = build_model(model_recipe(cfg), OBS, ACTIONS)
    assert model.tag == "mine" and model.core.is_lstm and model.rnn_state_size == 12
    assert model.act({"obs": torch.zeros(3, 4)}, torch.zeros(3, 12)).actions.shape == (3,)


def test_encoder_without_out_size_is_named(tmp_cfg):
    with pytest.raises(TypeError, match="NoOutSize.*out_size"):
        build_model(model_recipe(tmp_cfg(f"model.encoder._target_={HERE}.NoOutSize")), OBS, ACTIONS)


def test_bad_part_path_is_a_config_error(tmp_cfg):
    with pytest.raises(ConfigError, match=r"^model.action_head._target_='sf_hydra.models.nope.Head' is not allowed"):
        build_model(model_recipe(tmp_cfg("model.action_head._target_=sf_hydra.models.nope.Head")), OBS, ACTIONS)


def test_optimizer_reads_sample_factory_keys(tmp_cfg):
    cfg = tmp_cfg("algo.learning_rate=0.002", "algo.adam_eps=1e-7", "algo.adam_beta1=0.8", "algo.adam_beta2=0.99")
    [opt] = learner_for(cfg, OBS, ACTIONS).configure_optimizers()
    group = opt.param_groups[0]
    assert type(opt) is torch.optim.Adam
    assert (group["lr"], group["eps"], tuple(group["betas"])) == (0.002, 1e-7, (0.8, 0.99))


def test_optimizer_class_by_dotted_path(tmp_cfg):
    cfg = tmp_cfg("algo.optimizer._target_=torch.optim.AdamW", "+algo.optimizer.weight_decay=0.1",
                  "algo.learning_rate=0.003")
    [opt] = learner_for(cfg, OBS, ACTIONS).configure_optimizers()
    assert type(opt) is torch.optim.AdamW
    assert opt.param_groups[0]["lr"] == 0.003 and opt.param_groups[0]["weight_decay"] == 0.1


def test_each_policy_has_its_own_optimizer(tmp_cfg):
    learner = learner_for(tmp_cfg("algo.num_policies=3"), OBS, ACTIONS)
    opts = learner.configure_optimizers()
    assert len(opts) == 3
    for opt, model in zip(opts, learner.policies):
        assert [p for g in opt.param_groups for p in g["params"]] == list(model.parameters())
