"""Actor-critic networks: encoders, recurrent cores, action heads, normalizers."""

from sf_hydra.models.actor_critic import ActorCritic, build_model

__all__ = ["ActorCritic", "build_model"]
