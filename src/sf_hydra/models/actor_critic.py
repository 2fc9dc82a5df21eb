"""The actor-critic: preprocess -> encoder -> (RNN core) -> decoder -> policy and value heads.

The same module runs in the rollout workers (one step at a time) and in the learner
(whole trajectory chunks), so both always compute the same function.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.spaces import ACTION_MASK, num_discrete_actions, obs_shapes
from sf_hydra.core.targets import build, locate
from sf_hydra.core.trajectory import ACTION_DIST_PARAMS, Field
from sf_hydra.models.encoders import make_encoder, mlp
from sf_hydra.models.normalizer import ObservationPreprocessor, RunningMeanStd, check_normalize_input_keys
from sf_hydra.models.recipe import ModelRecipe


class StepOutput(NamedTuple):
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor  # in normalized-return units when normalize_returns is on
    rnn_states: Optional[torch.Tensor]
    # More per-row outputs to record in the trajectory, one per field the model declares in
    # `extra_trajectory_fields`, and `action_dist_params` when the model records it.
    extras: Optional[Dict[str, torch.Tensor]] = None


def act_per_policy(models, obs: Dict[str, torch.Tensor], rnn: Optional[torch.Tensor],
                   policies: np.ndarray) -> StepOutput:
    """Each policy (`models[p]`) acts for its rows (one forward per policy present); outputs in row order.
    The rollout workers and the inference servers both act through `policies_act` (this, or FusedPolicies for
    plain models), so a row's output is the same function of its policy's weights wherever it is computed."""
    present = np.unique(policies)
    if len(present) == 1:
        return models[present[0]].act(obs, rnn)
    parts = []
    for p in present:
        sel = torch.from_numpy(np.flatnonzero(policies == p))
        part_obs = {k: v.index_select(0, sel) for k, v in obs.items()}
        parts.append((sel, models[p].act(part_obs, None if rnn is None else rnn.index_select(0, sel))))
    return merge_outputs(parts, len(policies))


def merge_outputs(parts, rows: int) -> StepOutput:
    """One StepOutput of `rows` rows from `(row indices, output)` parts that cover them."""

    def merged(get):
        first = get(parts[0][1])
        if first is None:
            return None
        out = first.new_empty((rows, *first.shape[1:]))
        for sel, o in parts:
            out[sel] = get(o)
        return out

    extras = parts[0][1].extras
    extras = {k: merged(lambda o, k=k: o.extras[k]) for k in extras} if extras else None
    return StepOutput(merged(lambda o: o.actions), merged(lambda o: o.log_probs), merged(lambda o: o.values),
                      merged(lambda o: o.rnn_states), extras)



def policies_act(models):
    """The rollout workers' and inference servers' acting function, `act(obs, rnn, policies)` (policies:
    each row's index into `models`, one index for every row, or None for models[0] on every row):
    FusedPolicies where the models allow it, else each model's own `act` (act_per_policy with several
    policies)."""
    if FusedPolicies.supports(models):
        return FusedPolicies(models).act

    def act(obs, rnn, policies):
        if policies is None or isinstance(policies, int):
            return models[policies or 0].act(obs, rnn)
        return act_per_policy(models, obs, rnn, policies)
    return act


class FusedPolicies:
    """Plain feed-forward ActorCritics (one or several policies of one shape) acting with less
    per-call overhead than their `act`: on the small batches a worker acts on, a forward costs its
    per-call overhead more than its arithmetic (benchmarks/act_call.py: CartPole's MLP at 16 rows).

    - Rows of one policy: its layers run as a flat list (torch's linear and the activations' forward,
      no module calls); the output is bit for bit that of the model's `act`, with the same draws.
    - Rows of several policies: every row goes through every policy in one batched matmul per layer
      (torch.baddbmm over the policies' stacked weights), each row keeps its own policy's logits and
      value, and the action head samples all rows at once: 2 policies cost about what one does, where
      act_per_policy costs a forward per policy and a merge. A row's output is its policy's function
      (equal to `models[p].act` up to float rounding), with the draws models[p].act of all the rows
      would make (one uniform per row and action, in row order).

    The models' parameters become views into the stacked tensors (their values kept), so weights
    copied into a model in place (PolicyStore.load_into) act at once, with nothing to refresh.
    `supports` says which models qualify: the default ActorCritic class itself, no RNN core, one
    tower in float32 (not act_in_bf16), observation keys each encoded by an MLP, no input normalization (its
    statistics are per policy), a categorical action head; and at most MAX_POLICIES of them (every row goes through
    every policy)."""

    MAX_POLICIES = 4

    @classmethod
    def supports(cls, models) -> bool:
        from sf_hydra.models.action_heads import CategoricalHead
        from sf_hydra.models.encoders import MlpEncoder, MultiKeyEncoder

        if not 1 <= len(models) <= cls.MAX_POLICIES:
            return False
        for m in models:
            if type(m) is not ActorCritic or m.core is not None or m.separate_critic or len(m.preprocess.norms) \
                    or m.tower_bf16:
                return False
            if type(m.encoder) is not MultiKeyEncoder or type(m.action_head) is not CategoricalHead:
                return False
            if not all(type(e) is MlpEncoder and _plain_layers(e.net) is not None for e in m.encoder.encoders.values()):
                return False
            if _plain_layers(m.decoder) is None:
                return False
        shapes = [[tuple(t.shape) for t in m.parameters()] for m in models]
        return all(s == shapes[0] for s in shapes) and all(
            m.preprocess.obs_scale == models[0].preprocess.obs_scale
            and m.preprocess.obs_subtract_mean == models[0].preprocess.obs_subtract_mean for m in models)

    def __init__(self, models):
        self.models, self.n = list(models), len(models)
        m0 = self.models[0]
        keys = list(m0.encoder.encoders)
        # Each policy's own layers, flat: (weight, bias) of a linear layer, or an activation's forward.
        self.own = [([(k, _flat_chain(m.encoder.encoders[k].net)) for k in keys], _flat_chain(m.decoder))
                    for m in self.models]
        self.rows = torch.arange(0)
        if self.n == 1:
            return
        self.encoders = [(k, self._stack_layers([m.encoder.encoders[k].net for m in self.models])) for k in keys]
        self.decoder = self._stack_layers([m.decoder for m in self.models])
        # The action head's and the value head's linear layers as one: [P, K + 1, F], the value last.
        self.num_logits = m0.action_head.linear.out_features
        self.head_w, self.head_b = self._stack_linears(
            [[m.action_head.linear for m in self.models], [m.value_head for m in self.models]])

    @staticmethod
    def _stack_linears(groups):
        """Stacks the linear layers (groups of one per policy, their outputs concatenated in group order)
        into weights [P, out, in] and biases [P, 1, out]; every layer's weight and bias become views of
        them."""
        per_policy = list(zip(*groups))
        w = torch.stack([torch.cat([lin.weight.detach() for lin in layers]) for layers in per_policy])
        b = torch.stack([torch.cat([lin.bias.detach() for lin in layers]) for layers in per_policy]).unsqueeze(1)
        for p, layers in enumerate(per_policy):
            start = 0
            for lin in layers:
                end = start + lin.out_features
                lin.weight.data, lin.bias.data = w[p, start:end], b[p, 0, start:end]
                start = end
        return w, b

    def _stack_layers(self, nets):
        """[(weights, biases) of a stacked Linear, or an activation's forward] for one layer chain."""
        chains = [_plain_layers(net) for net in nets]
        return [self._stack_linears([[c[i] for c in chains]]) if isinstance(layer, nn.Linear) else layer.forward
                for i, layer in enumerate(chains[0])]

    @staticmethod
    def _run(x: torch.Tensor, layers) -> torch.Tensor:
        """x: [R, in] (the same rows for every policy) or [P, R, in]; returns [P, R, out]."""
        for layer in layers:
            if isinstance(layer, tuple):
                w, b = layer
                x = torch.baddbmm(b, x.expand(w.shape[0], *x.shape) if x.dim() == 2 else x, w.transpose(1, 2))
            else:
                x = layer(x)
        return x

    @staticmethod
    def _run_own(x: torch.Tensor, layers) -> torch.Tensor:
        for layer in layers:
            x = torch.nn.functional.linear(x, *layer) if isinstance(layer, tuple) else layer(x)
        return x

    @torch.no_grad()
    def act(self, obs: Dict[str, torch.Tensor], rnn: Optional[torch.Tensor], policies: Optional[np.ndarray],
            deterministic: bool = False) -> StepOutput:
        """As `models[p].act` for the rows of policy p (`policies`: each row's p, or one p for all; None: 0)."""
        if policies is None or isinstance(policies, int):
            return self._act_one(policies or 0, obs, deterministic)
        first = policies[0]
        if self.n == 1 or (policies == first).all():
            return self._act_one(int(first), obs, deterministic)
        m0, rows = self.models[0], len(policies)
        inputs = m0._inputs(obs)
        feats = [self._run(inputs[key].reshape(rows, -1), layers) for key, layers in self.encoders]
        feats = [f.expand(self.n, *f.shape) if f.dim() == 2 else f for f in feats]  # keys with no layers
        x = self._run(feats[0] if len(feats) == 1 else torch.cat(feats, dim=-1), self.decoder)
        if len(self.rows) < rows:
            self.rows = torch.arange(rows)
        both = torch.baddbmm(self.head_b, x, self.head_w.transpose(1, 2))[torch.from_numpy(policies),
                                                                          self.rows[:rows]]
        return self._sample(m0, obs, both[:, :self.num_logits], both[:, self.num_logits], deterministic)

    def _act_one(self, p: int, obs: Dict[str, torch.Tensor], deterministic: bool) -> StepOutput:
        m = self.models[p]
        inputs = m._inputs(obs)
        encoders, decoder = self.own[p]
        feats = [self._run_own(inputs[key].reshape(inputs[key].shape[0], -1), layers) for key, layers in encoders]
        x = self._run_own(feats[0] if len(feats) == 1 else torch.cat(feats, dim=1), decoder)
        logits = torch.nn.functional.linear(x, m.action_head.linear.weight, m.action_head.linear.bias)
        values = torch.nn.functional.linear(x, m.value_head.weight, m.value_head.bias).squeeze(-1)
        return self._sample(m, obs, logits, values, deterministic)

    @staticmethod
    def _sample(m, obs, logits, values, deterministic: bool) -> StepOutput:
        mask = obs[ACTION_MASK].reshape(len(logits), -1) if m.masked else None
        dist = m.action_head.from_logits(logits, mask)
        actions, log_probs = dist.act(deterministic)
        extras = {ACTION_DIST_PARAMS: dist.params()} if m.action_dist_params_size else None
        return StepOutput(actions, log_probs, values, None, extras)


def _flat_chain(net: nn.Module) -> list:
    """`_plain_layers` of a model's own chain: (weight, bias) of each linear layer (the parameters
    themselves: in-place weight copies show), an activation's forward."""
    return [(layer.weight, layer.bias) if isinstance(layer, nn.Linear) else layer.forward
            for layer in _plain_layers(net)]


def _plain_layers(net: nn.Module) -> Optional[list]:
    """The layers of a chain of nn.Sequential, nn.Flatten, nn.Linear and activations (ELU, ReLU, Tanh) in
    call order, Flatten left out (rows arrive flat); None for any other module."""
    from sf_hydra.models.encoders import ACTIVATIONS

    if isinstance(net, nn.Sequential) and type(net) is nn.Sequential:
        layers = []
        for child in net:
            sub = _plain_layers(child)
            if sub is None:
                return None
            layers += sub
        return layers
    if type(net) is nn.Flatten:
        return []
    if type(net) is nn.Linear and net.bias is not None:
        return [net]
    if type(net) in tuple(ACTIVATIONS.values()):
        return [net]
    return None


class ActorCritic(nn.Module):
    """With model.actor_critic_share_weights (the default) one tower (encoder, core, decoder)
    feeds both heads. Without it the critic has a tower of its own (`critic_encoder`,
    `critic_core`, `critic_decoder`): the action head reads only the actor's tower
    (`encoder`, `core`, `decoder`), the value head only the critic's, so the value loss
    trains no actor parameter and the policy loss no critic one. A recurrent model's state is
    then the actor's state followed by the critic's (rnn_state_size doubles).

    An observation key `action_mask` (spaces.ACTION_MASK) is not encoded: it is handed to the
    action head, which gives the forbidden actions probability 0.

    Built from the observation shapes, the action space and the run's `ModelRecipe` (models/recipe.py): its
    `model` node gives the parts and sizes, its other values the observation and return normalization."""

    def __init__(self, obs_shapes: Dict[str, tuple], action_space: gym.Space, recipe: ModelRecipe):
        super().__init__()
        check_action_mask(obs_shapes, action_space, recipe.env_id)
        self.masked = ACTION_MASK in obs_shapes
        obs_shapes = {k: v for k, v in obs_shapes.items() if k != ACTION_MASK}
        self.preprocess = ObservationPreprocessor(obs_shapes, recipe.obs_scale, recipe.obs_subtract_mean,
                                                  recipe.normalize_input, recipe.normalize_input_keys)
        self.returns_norm = RunningMeanStd(()) if recipe.normalize_returns else None
        model_cfg = recipe.model
        self.encoder, self.core, self.decoder, size = _tower(obs_shapes, model_cfg)
        self.critic_encoder = self.critic_core = self.critic_decoder = None
        value_size = size
        if not model_cfg.actor_critic_share_weights:
            self.critic_encoder, self.critic_core, self.critic_decoder, value_size = _tower(obs_shapes, model_cfg)
        self.action_head = build("model.action_head", model_cfg.action_head, size, action_space, model_cfg)
        self.value_head = nn.Linear(value_size, 1)
        # The behaviour distribution's parameters are recorded only for a loss that reads them.
        self.action_dist_params_size = action_dist_params_size(self.action_head, recipe.kl_loss_coeff)
        self._initialize(model_cfg.policy_initialization, model_cfg.policy_init_gain, model_cfg.action_head_init_gain)
        self.tower_bf16 = False  # act_in_bf16: towers' weights in bfloat16 (a copy that acts, never one that learns)

    @property
    def separate_critic(self) -> bool:
        return self.critic_encoder is not None

    @property
    def rnn_state_size(self) -> int:
        if self.core is None:
            return 0
        return self.core.state_size + (self.critic_core.state_size if self.separate_critic else 0)

    def extra_trajectory_fields(self) -> List[Field]:
        """Fields beyond the standard ones (sf_hydra.core.trajectory) that `act` fills through
        `StepOutput.extras`; the learner's batch then holds them under the same names."""
        return []

    def _initialize(self, scheme: str, gain: float, head_gain: float) -> None:
        """Linear and conv layers by `scheme` with `gain`, biases zero; the action head's linear
        layers orthogonal with `head_gain` (model.action_head_init_gain). The recurrent core
        keeps torch's own initialization. `torch_default` leaves every layer as torch made it."""
        if scheme == "torch_default":
            return
        init = nn.init.orthogonal_ if scheme == "orthogonal" else nn.init.xavier_uniform_
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                init(m.weight, gain=gain)
                nn.init.zeros_(m.bias)
        for m in self.action_head.modules():
            if isinstance(m, nn.Linear):
                nn.init.orthogonal_(m.weight, gain=head_gain)

    def towers(self) -> List[nn.Module]:
        """The encoder, core and decoder of the actor's tower and, without shared weights, of the critic's."""
        parts = [self.encoder, self.core, self.decoder, self.critic_encoder, self.critic_core, self.critic_decoder]
        return [p for p in parts if p is not None]

    def act_in_bf16(self) -> "ActorCritic":
        """Makes this copy act with its towers' weights in bfloat16 (hardware.acting_precision): the weights
        copied into it later (PolicyStore.load_into) are rounded once per copy, not at every call as autocast
        would round them, and a worker's forward reads half the bytes. Acting runs under bfloat16 autocast
        (the images are scaled straight to bfloat16); the observation normalizer, the heads and what act
        returns stay float32: the behaviour log-probs are computed from float32 logits. Only for a copy that
        acts: its weights are no longer the learner's exact values."""
        for tower in self.towers():
            tower.to(torch.bfloat16)
        self.tower_bf16 = True
        return self

    def _inputs(self, obs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The preprocessed observations the encoders read (the action mask left out)."""
        return self.preprocess({k: v for k, v in obs.items() if k != ACTION_MASK})

    def _features(self, obs: Dict[str, torch.Tensor]) -> torch.Tensor:
        """The actor tower's encoder features."""
        return self.encoder(self._inputs(obs))

    def _distribution(self, x: torch.Tensor, obs: Dict[str, torch.Tensor]):
        """The action head's distribution for features x, masked when the env sends a mask."""
        if self.masked:
            mask = obs[ACTION_MASK]
            return self.action_head.distribution(x, action_mask=mask.reshape(x.shape[0], -1))
        return self.action_head.distribution(x)

    def _split_state(self, rnn_states: Optional[torch.Tensor]):
        """(actor's, critic's) parts of the RNN state (the critic's is None when shared)."""
        if rnn_states is None or not self.separate_critic:
            return rnn_states, None
        return rnn_states.split([self.core.state_size, self.critic_core.state_size], dim=-1)

    def forward_step(self, obs: Dict[str, torch.Tensor], rnn_states: Optional[torch.Tensor]):
        """One step of the network for a batch of envs, before any action is drawn: (the action distribution,
        the values [B], the next RNN states or None). `act` draws from it; an exported policy
        (evaluation/export.py) returns its parameters and its most likely action."""
        inputs = self._inputs(obs)
        actor_state, critic_state = self._split_state(rnn_states)
        x, actor_state = _tower_step(self.encoder, self.core, self.decoder, inputs, actor_state)
        v, rnn_states = x, actor_state
        if self.separate_critic:
            v, critic_state = _tower_step(self.critic_encoder, self.critic_core, self.critic_decoder, inputs,
                                          critic_state)
            rnn_states = None if actor_state is None else torch.cat([actor_state, critic_state], dim=-1)
        if self.tower_bf16:  # the heads in float32 on the towers' features
            with torch.autocast(x.device.type, enabled=False):
                x, v = x.float(), v.float()
                return self._distribution(x, obs), self.value_head(v).squeeze(-1), rnn_states
        return self._distribution(x, obs), self.value_head(v).squeeze(-1), rnn_states

    @torch.no_grad()
    def act(self, obs: Dict[str, torch.Tensor], rnn_states: Optional[torch.Tensor],
            deterministic: bool = False) -> StepOutput:
        """One step for a batch of envs (rollout workers, evaluation)."""
        dist, values, rnn_states = self.forward_step(obs, rnn_states)
        if hasattr(dist, "act"):  # a distribution with a fast acting path (categoricals)
            actions, log_probs = dist.act(deterministic)
        else:
            actions = dist.mode() if deterministic else dist.sample()
            log_probs = dist.log_prob(actions)
        extras = {ACTION_DIST_PARAMS: dist.params()} if self.action_dist_params_size else None
        return StepOutput(actions, log_probs, values, rnn_states, extras)

    def evaluate(self, obs: Dict[str, torch.Tensor], actions: torch.Tensor, rnn_states: Optional[torch.Tensor],
                 dones: Optional[torch.Tensor], with_distribution: bool = False):
        """Learner forward over [B, T] chunks: log-probs, entropy and values of `actions`, and
        with `with_distribution` the action distribution too (over the B*T rows, for the KL
        losses). rnn_states is the state before the first step of each chunk."""
        b, t = actions.shape[:2]
        flat = {k: v.reshape(b * t, *v.shape[2:]) for k, v in obs.items()}
        inputs = self._inputs(flat)
        actor_state, critic_state = self._split_state(rnn_states)
        x = _tower_unroll(self.encoder, self.core, self.decoder, inputs, actor_state, dones, b, t)
        v = x
        if self.separate_critic:
            v = _tower_unroll(self.critic_encoder, self.critic_core, self.critic_decoder, inputs, critic_state,
                              dones, b, t)
        dist = self._distribution(x, flat)
        flat_actions = actions.reshape(b * t, *actions.shape[2:])
        log_probs = dist.log_prob(flat_actions).reshape(b, t)
        out = (log_probs, dist.entropy().reshape(b, t), self.value_head(v).reshape(b, t))
        return (*out, dist) if with_distribution else out


def _tower(obs_shapes: Dict[str, tuple], model_cfg):
    """(encoder, core or None, decoder, feature size): one encoder-core-decoder stack."""
    encoder = make_encoder(obs_shapes, model_cfg)
    size = encoder.out_size
    core = build("model.core", model_cfg.core, size, model_cfg) if model_cfg.use_rnn else None
    size = core.out_size if core else size
    decoder = mlp(size, model_cfg.decoder_mlp_layers, model_cfg.nonlinearity)
    size = model_cfg.decoder_mlp_layers[-1] if model_cfg.decoder_mlp_layers else size
    return encoder, core, decoder, size


def _tower_step(encoder, core, decoder, inputs, state):
    """One step of a tower: (features, new state)."""
    x = encoder(inputs)
    if core is not None:
        x, state = core.step(x, state)
    return decoder(x), state


def _tower_unroll(encoder, core, decoder, inputs, state, dones, b: int, t: int) -> torch.Tensor:
    """A tower over [B, T] chunks flattened to B*T rows: features [B*T, F]."""
    x = encoder(inputs)
    if core is not None:
        x = core.unroll(x.reshape(b, t, -1), state, dones).reshape(b * t, -1)
    return decoder(x)


def check_action_mask(obs_shapes: Dict[str, tuple], action_space: gym.Space, env_id: str) -> None:
    """An `action_mask` observation needs discrete actions, one mask entry per discrete action (`env_id`: the
    env.id named in the message)."""
    if ACTION_MASK not in obs_shapes:
        return
    n, shape = num_discrete_actions(action_space), tuple(obs_shapes[ACTION_MASK])
    if n == 0:
        raise ConfigError("env.id", env_id, f"an env whose action space has discrete actions when it sends the "
                          f"observation key {ACTION_MASK!r}: its action space {action_space} has none to mask")
    if shape != (n,):
        raise ConfigError("env.id", env_id, f"an env whose observation {ACTION_MASK!r} has shape ({n},), one entry "
                          f"per discrete action of its action space {action_space}; it has shape {shape}")


def action_dist_params_size(action_head: nn.Module, kl_loss_coeff: float) -> int:
    """Numbers per step of the behaviour distribution's parameters the rollout workers record:
    the head's `params_size` when algo.kl_loss_coeff > 0, else 0 (nothing recorded)."""
    if not kl_loss_coeff > 0:
        return 0
    size = getattr(action_head, "params_size", None)
    if size is None:
        raise ConfigError("algo.kl_loss_coeff", kl_loss_coeff,
                          f"0 with the action head {type(action_head).__name__}: the KL penalty needs a head with "
                          "`params_size` whose distributions offer params() and kl_to(old_params)")
    return int(size)


def check_model_for_env(cfg, obs_space: gym.Space, action_space: gym.Space) -> None:
    """The model keys that depend on the env's spaces (read from one env before any process
    starts): algo.normalize_input_keys names observation keys, an action mask fits the actions."""
    shapes = obs_shapes(obs_space)
    check_normalize_input_keys(cfg.algo.normalize_input_keys, [k for k in shapes if k != ACTION_MASK])
    check_action_mask(shapes, action_space, str(cfg.env.id))


def acting_copy(model: nn.Module, bf16: bool) -> nn.Module:
    """A freshly built model made into a copy that acts (a rollout worker's, an inference server's): in eval mode
    and, with `bf16` (hardware.acting_precision resolved), its towers in bfloat16 (ActorCritic.act_in_bf16; a
    model class without that method acts under bf16 autocast with its weights as they are)."""
    model.eval()
    if bf16 and hasattr(model, "act_in_bf16"):
        model.act_in_bf16()
    return model


def build_model(recipe: ModelRecipe, obs_space: gym.Space, action_space: gym.Space) -> ActorCritic:
    """The policy for an env's spaces, as the learner, the rollout workers and enjoy build it (the recipe:
    models/recipe.py): the class `model._target_` names (default ActorCritic), called with ActorCritic's
    arguments."""
    network = locate("model._target_", recipe.model._target_)
    return network(obs_shapes(obs_space), action_space, recipe)
