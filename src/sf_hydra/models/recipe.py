"""How every process builds a policy of the run's class and shape (ModelRecipe: build_model's config nodes,
resolved and plain, so it pickles to rollout workers, inference servers and the evaluation process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

import gymnasium as gym
import torch
from omegaconf import OmegaConf

from sf_hydra.models.actor_critic import build_model


def plain(node) -> Dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)


@dataclass(frozen=True)
class ModelRecipe:
    """build_model's three config nodes, resolved and plain (picklable): how every process (rollout
    worker, inference server) builds a policy of the run's class and shape, to load weights into."""

    model: Dict[str, Any] = field(repr=False)
    env: Dict[str, Any] = field(repr=False)
    algo: Dict[str, Any] = field(repr=False)

    def build(self, obs_space: gym.Space, action_space: gym.Space) -> torch.nn.Module:
        return build_model(OmegaConf.create({"model": self.model, "env": self.env, "algo": self.algo}), obs_space,
                           action_space)
