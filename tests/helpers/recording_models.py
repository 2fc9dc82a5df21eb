"""A user's model class (named by `model._target_`) that records one more trajectory field:
its behaviour logits, as a KL term against the acting policy would need."""

from __future__ import annotations

import torch

from sf_hydra.core.spaces import discrete_sizes
from sf_hydra.core.trajectory import Field
from sf_hydra.models import ActorCritic
from sf_hydra.models.actor_critic import StepOutput


class LogitsActorCritic(ActorCritic):
    """Discrete actions only: the acting distribution's logits, one row per step."""

    def extra_trajectory_fields(self):
        return [Field("behaviour_logits", (sum(discrete_sizes(self.action_space)),))]

    def __init__(self, obs_shapes, action_space, *args):
        super().__init__(obs_shapes, action_space, *args)
        self.action_space = action_space

    @torch.no_grad()
    def act(self, obs, rnn_states, deterministic: bool = False) -> StepOutput:
        x = self._features(obs)
        if self.core is not None:
            x, rnn_states = self.core.step(x, rnn_states)
        x = self.decoder(x)
        logits = self.action_head.linear(x)
        dist = self.action_head.distribution(x)
        actions = dist.mode() if deterministic else dist.sample()
        values = self.value_head(x).squeeze(-1)
        return StepOutput(actions, dist.log_prob(actions), values, rnn_states, {"behaviour_logits": logits})


class TaggedActorCritic(ActorCritic):
    """Records, with every step, the `tag` buffer of the model that acted. The tag travels
    with the weights (buffers are published with them), so a test that sets policy k's tag to
    k reads in each transition which policy's weights acted."""

    def __init__(self, *args):
        super().__init__(*args)
        self.register_buffer("tag", torch.zeros(()))

    def extra_trajectory_fields(self):
        return [Field("acting_tag")]

    @torch.no_grad()
    def act(self, obs, rnn_states, deterministic: bool = False) -> StepOutput:
        out = super().act(obs, rnn_states, deterministic)
        return out._replace(extras={"acting_tag": self.tag.expand(out.actions.shape[0]).clone()})


class FailingToActActorCritic(ActorCritic):
    """Raises whenever it acts: where it acts (an inference server) fails, and says so."""

    @torch.no_grad()
    def act(self, obs, rnn_states, deterministic: bool = False) -> StepOutput:
        raise RuntimeError("the policy cannot act (a test model that always fails)")
