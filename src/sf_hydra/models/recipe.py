"""What every process builds a policy of the run's class and shape from: a `ModelRecipe`, the `model` node typed
by its schema and the few env and algo values a network reads. The run's plan builds it once (sf_hydra/plan.py);
it reaches rollout workers, inference servers and the evaluation process by pickle, so it holds plain values.
A loaded run (evaluation/policy.py) builds it from its saved config the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from omegaconf import OmegaConf

from sf_hydra.config.schema import ModelConfig, typed_group


def plain(node) -> Dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)


@dataclass(frozen=True)
class ModelRecipe:
    """A network's class, parts and sizes (`model`, the model node as its schema's dataclass: the network's
    `_target_`, its parts' `_target_` nodes with their own keys) and what else it reads of the run's env and algo:
    how observations are scaled and normalized, whether returns are normalized, whether the behaviour
    distribution's parameters are recorded. The network class is called with it (models/actor_critic.py
    build_model); its parts get `model`."""

    model: ModelConfig = field(repr=False)
    env_id: str  # env.id, named in messages about the env's spaces
    obs_scale: float  # env.obs_scale: observations are divided by it
    obs_subtract_mean: float  # env.obs_subtract_mean: subtracted before that division
    normalize_input: bool  # algo.normalize_input: observations normalized by running statistics
    normalize_input_keys: Optional[Tuple[str, ...]]  # algo.normalize_input_keys (None: every key)
    normalize_returns: bool  # algo.normalize_returns: values in normalized-return units
    kl_loss_coeff: float  # algo.kl_loss_coeff: above 0 the rollout workers record the behaviour distribution


def model_recipe(cfg) -> ModelRecipe:
    """The recipe of a config's `model`, `env` and `algo` nodes (the composed config, or a run's saved one)."""
    env, algo = cfg.env, cfg.algo
    keys = algo.normalize_input_keys
    return ModelRecipe(
        model=typed_group(ModelConfig, cfg.model), env_id=str(env.id), obs_scale=float(env.obs_scale),
        obs_subtract_mean=float(env.obs_subtract_mean), normalize_input=bool(algo.normalize_input),
        normalize_input_keys=None if keys is None else tuple(str(k) for k in keys),
        normalize_returns=bool(algo.normalize_returns), kl_loss_coeff=float(algo.kl_loss_coeff),
    )
