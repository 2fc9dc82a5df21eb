"""The loss keys' rules that need the env's action space or the model's trajectory fields
(which a config alone cannot tell). Light on purpose: train() checks them before it imports
Lightning or starts a worker."""

from __future__ import annotations

import gymnasium as gym

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.spaces import ACTION_MASK, is_mixed_tuple
from sf_hydra.core.trajectory import ACTION_DIST_PARAMS, obs_field_name


def check_losses_apply(algo, action_space, spec) -> None:
    """The loss choices that depend on the env's action space or on the model's trajectory spec.
    train() runs it on a model built from the config before any process starts (and before the
    run folder is touched); PPOLearner runs it again on its own model."""
    if algo.exploration_loss == "symmetric_kl" and isinstance(action_space, gym.spaces.Box):
        raise ConfigError("algo.exploration_loss", "symmetric_kl",
                          f"entropy for the continuous action space {action_space} (a uniform prior over an "
                          "unbounded Box does not exist)")
    if algo.exploration_loss == "symmetric_kl" and is_mixed_tuple(action_space):
        raise ConfigError("algo.exploration_loss", "symmetric_kl",
                          f"entropy for the mixed action space {action_space} (symmetric_kl is for discrete actions "
                          "only: its Box part has no uniform prior)")
    if algo.exploration_loss == "symmetric_kl" and obs_field_name(ACTION_MASK) in spec:
        raise ConfigError("algo.exploration_loss", "symmetric_kl",
                          f"entropy for an env that masks actions (observation {ACTION_MASK!r}): the KL to a uniform "
                          "prior over every action is unbounded once forbidden actions have probability 0")
    if algo.kl_loss_coeff > 0 and ACTION_DIST_PARAMS not in spec:
        raise ConfigError("algo.kl_loss_coeff", algo.kl_loss_coeff,
                          "0 with this model: it records no action_dist_params (the behaviour distribution the KL "
                          "penalty compares with); a network class of your own sets action_dist_params_size")
