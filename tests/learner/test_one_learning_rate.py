"""algo.learning_rate and algo.adam_* are the one source of the optimizer's lr, eps and betas: the learner sets
each policy's groups from its hyperparameters whatever algo.optimizer passes its class, and a node value that
differs is refused, naming the key, the value and what to set instead."""

import gymnasium as gym
import numpy as np
import pytest

from sf_hydra.config.validation import validate
from sf_hydra.core.errors import ConfigError
from tests.helpers.plans import learner_for

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def _groups(cfg):
    validate(cfg)
    learner = learner_for(cfg, OBS, gym.spaces.Discrete(2))
    return [(opt.param_groups, hyper) for opt, hyper in zip(learner.configure_optimizers(), learner.hyperparams)]


def _follows(groups, hyper) -> bool:
    return all(g["lr"] == hyper["learning_rate"] and g["eps"] == hyper["adam_eps"]
               and tuple(g["betas"]) == (hyper["adam_beta1"], hyper["adam_beta2"]) for g in groups)


@pytest.mark.parametrize("overrides", [
    (),
    ("algo.learning_rate=0.003", "algo.adam_eps=1e-7", "algo.adam_beta1=0.8"),
    ("algo.optimizer_type=lamb", "algo.learning_rate=0.002"),
    # a node of the user's own without the arguments: the class's defaults would have stayed
    ("~algo.optimizer.lr", "~algo.optimizer.eps", "~algo.optimizer.betas", "algo.learning_rate=0.02"),
    ("algo.optimizer.lr=0.003", "algo.learning_rate=0.003"),  # repeating algo's value is allowed
    ("algo.num_policies=2", "+pbt.initial_hyperparams={1: {learning_rate: 0.005, adam_eps: 1e-5}}"),
])
def test_the_optimizer_follows_each_policys_hyperparameters(tmp_cfg, overrides):
    cfg = tmp_cfg(*overrides)
    for groups, hyper in _groups(cfg):
        assert _follows(groups, hyper), (groups, hyper)
    assert _groups(cfg)[0][1]["learning_rate"] == cfg.algo.learning_rate


@pytest.mark.parametrize("override, key, instead", [
    ("algo.optimizer.lr=0.01", "algo.optimizer.lr=0.01", "set algo.learning_rate=0.01 instead"),
    ("algo.optimizer.eps=1e-05", "algo.optimizer.eps=1e-05", "set algo.adam_eps=1e-05 instead"),
    ("algo.optimizer.betas=[0.8,0.9]", "algo.optimizer.betas=[0.8, 0.9]",
     "set algo.adam_beta1=0.8 algo.adam_beta2=0.9 instead"),
])
def test_a_second_value_in_the_optimizer_node_is_refused(tmp_cfg, override, key, instead):
    with pytest.raises(ConfigError) as refused:
        validate(tmp_cfg(override))
    assert str(refused.value).startswith(key) and instead in str(refused.value)
