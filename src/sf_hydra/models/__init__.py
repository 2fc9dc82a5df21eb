"""Actor-critic networks: encoders, recurrent cores, action heads, normalizers."""

from sf_hydra.models.actor_critic import ActorCritic, build_model
from sf_hydra.models.recipe import ModelRecipe, model_recipe

__all__ = ["ActorCritic", "ModelRecipe", "build_model", "model_recipe"]
