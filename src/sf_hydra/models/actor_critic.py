"""The actor-critic: preprocess -> encoder -> (RNN core) -> decoder -> policy and value heads.

The same module runs in the rollout workers (one step at a time) and in the learner
(whole trajectory chunks), so both always compute the same function.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

import gymnasium as gym
import torch
from torch import nn

from sf_hydra.models.encoders import make_encoder, mlp
from sf_hydra.models.normalizer import ObservationPreprocessor, RunningMeanStd
from sf_hydra.spaces import obs_shapes
from sf_hydra.targets import build, locate
from sf_hydra.trajectory import ACTION_DIST_PARAMS, Field


class StepOutput(NamedTuple):
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor  # in normalized-return units when normalize_returns is on
    rnn_states: Optional[torch.Tensor]
    # More per-row outputs to record in the trajectory, one per field the model declares in
    # `extra_trajectory_fields`, and `action_dist_params` when the model records it.
    extras: Optional[Dict[str, torch.Tensor]] = None


class ActorCritic(nn.Module):
    def __init__(self, obs_shapes: Dict[str, tuple], action_space: gym.Space, model_cfg, env_cfg, algo_cfg):
        super().__init__()
        self.preprocess = ObservationPreprocessor(
            obs_shapes, env_cfg.obs_scale, env_cfg.obs_subtract_mean, algo_cfg.normalize_input
        )
        self.returns_norm = RunningMeanStd(()) if algo_cfg.normalize_returns else None
        self.encoder = make_encoder(obs_shapes, model_cfg)
        size = self.encoder.out_size
        self.core = build("model.core", model_cfg.core, size, model_cfg) if model_cfg.use_rnn else None
        size = self.core.out_size if self.core else size
        self.decoder = mlp(size, model_cfg.decoder_mlp_layers, model_cfg.nonlinearity)
        size = model_cfg.decoder_mlp_layers[-1] if model_cfg.decoder_mlp_layers else size
        self.action_head = build("model.action_head", model_cfg.action_head, size, action_space, model_cfg)
        self.value_head = nn.Linear(size, 1)
        # The behaviour distribution's parameters are recorded only for a loss that reads them.
        self.action_dist_params_size = action_dist_params_size(self.action_head, algo_cfg)
        self._initialize(model_cfg.policy_initialization, model_cfg.policy_init_gain)

    @property
    def rnn_state_size(self) -> int:
        return self.core.state_size if self.core else 0

    def extra_trajectory_fields(self) -> List[Field]:
        """Fields beyond the standard ones (sf_hydra.trajectory) that `act` fills through
        `StepOutput.extras`; the learner's batch then holds them under the same names."""
        return []

    def _initialize(self, scheme: str, gain: float) -> None:
        if scheme == "torch_default":
            return
        init = nn.init.orthogonal_ if scheme == "orthogonal" else nn.init.xavier_uniform_
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                init(m.weight, gain=gain)
                nn.init.zeros_(m.bias)
        # Small policy logits at start: near-uniform actions, as in most PPO codebases.
        for m in self.action_head.modules():
            if isinstance(m, nn.Linear):
                nn.init.orthogonal_(m.weight, gain=0.01)

    def _features(self, obs: Dict[str, torch.Tensor]) -> torch.Tensor:
        return self.encoder(self.preprocess(obs))

    @torch.no_grad()
    def act(self, obs: Dict[str, torch.Tensor], rnn_states: Optional[torch.Tensor],
            deterministic: bool = False) -> StepOutput:
        """One step for a batch of envs (rollout workers, evaluation)."""
        x = self._features(obs)
        if self.core is not None:
            x, rnn_states = self.core.step(x, rnn_states)
        x = self.decoder(x)
        dist = self.action_head.distribution(x)
        if hasattr(dist, "act"):  # a distribution with a fast acting path (categoricals)
            actions, log_probs = dist.act(deterministic)
        else:
            actions = dist.mode() if deterministic else dist.sample()
            log_probs = dist.log_prob(actions)
        extras = {ACTION_DIST_PARAMS: dist.params()} if self.action_dist_params_size else None
        return StepOutput(actions, log_probs, self.value_head(x).squeeze(-1), rnn_states, extras)

    def evaluate(self, obs: Dict[str, torch.Tensor], actions: torch.Tensor, rnn_states: Optional[torch.Tensor],
                 dones: Optional[torch.Tensor], with_distribution: bool = False):
        """Learner forward over [B, T] chunks: log-probs, entropy and values of `actions`, and
        with `with_distribution` the action distribution too (over the B*T rows, for the KL
        losses). rnn_states is the state before the first step of each chunk."""
        b, t = actions.shape[:2]
        flat = {k: v.reshape(b * t, *v.shape[2:]) for k, v in obs.items()}
        x = self._features(flat)
        if self.core is not None:
            x = self.core.unroll(x.reshape(b, t, -1), rnn_states, dones).reshape(b * t, -1)
        x = self.decoder(x)
        dist = self.action_head.distribution(x)
        flat_actions = actions.reshape(b * t, *actions.shape[2:])
        log_probs = dist.log_prob(flat_actions).reshape(b, t)
        out = (log_probs, dist.entropy().reshape(b, t), self.value_head(x).reshape(b, t))
        return (*out, dist) if with_distribution else out


def action_dist_params_size(action_head: nn.Module, algo_cfg) -> int:
    """Numbers per step of the behaviour distribution's parameters the rollout workers record:
    the head's `params_size` when algo.kl_loss_coeff > 0, else 0 (nothing recorded)."""
    if not getattr(algo_cfg, "kl_loss_coeff", 0.0) > 0:
        return 0
    size = getattr(action_head, "params_size", None)
    if size is None:
        from sf_hydra.config.errors import ConfigError

        raise ConfigError("algo.kl_loss_coeff", algo_cfg.kl_loss_coeff,
                          f"0 with the action head {type(action_head).__name__}: the KL penalty needs a head with "
                          "`params_size` whose distributions offer params() and kl_from(old_params)")
    return int(size)


def build_model(cfg, obs_space: gym.Space, action_space: gym.Space) -> ActorCritic:
    """The policy for an env's spaces, as the learner, the rollout workers and enjoy build it:
    the class `model._target_` names (default ActorCritic), called with ActorCritic's arguments."""
    network = locate("model._target_", cfg.model["_target_"])
    return network(obs_shapes(obs_space), action_space, cfg.model, cfg.env, cfg.algo)
