"""Sample Factory 2.x weights -> our ActorCritic's state_dict, by name.

Sample Factory's actor-critic (sample_factory/model/) and ours compute the same function when their parts line
up: its encoder (an MLP per vector key, a conv stack + MLP per image key; Doom's `basic_encoder`), its core
(torch's GRU/LSTM, or none), its decoder MLP, `critic_linear`, `action_parameterization.distribution_linear`
(a categorical's logits) and its running mean/std normalizers. Each of its state_dict names is rewritten to
ours by a table of name prefixes (SF_PREFIXES); then every tensor of its model must land on one of ours with
the same shape, and every one of ours must be filled. What does not is refused, naming the part
(`UnmappablePart`): a different function would otherwise play under the imported name."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from sf_hydra.core.errors import ConfigError

# (Sample Factory's name prefix, ours). `{key}` is an observation key. Shared weights (the default) and
# separate actor/critic towers (actor_critic_share_weights=False) both.
_OBS_NORM = r"obs_normalizer\.running_mean_std\.running_mean_std\.(?P<key>[^.]+)"
SF_PREFIXES: List[Tuple[str, str]] = [
    (_OBS_NORM + r"\.running_mean$", "preprocess.norms.{key}.mean"),
    (_OBS_NORM + r"\.running_var$", "preprocess.norms.{key}.var"),
    (_OBS_NORM + r"\.count$", "preprocess.norms.{key}.count"),
    (r"returns_normalizer\.running_mean$", "returns_norm.mean"),
    (r"returns_normalizer\.running_var$", "returns_norm.var"),
    (r"returns_normalizer\.count$", "returns_norm.count"),
    # MultiInputEncoder: an MLP per vector key, a conv stack (+ MLP) per image key
    (r"(?P<tower>encoder|actor_encoder|critic_encoder)\.encoders\.(?P<key>[^.]+)\.mlp_head\.(?P<rest>.+)$",
     "{tower}.encoders.{key}.net.1.{rest}"),
    (r"(?P<tower>encoder|actor_encoder|critic_encoder)\.encoders\.(?P<key>[^.]+)\.enc\.conv_head\.(?P<rest>.+)$",
     "{tower}.encoders.{key}.conv.{rest}"),
    (r"(?P<tower>encoder|actor_encoder|critic_encoder)\.encoders\.(?P<key>[^.]+)\.enc\.mlp_layers\.(?P<rest>.+)$",
     "{tower}.encoders.{key}.fc.{rest}"),
    # sf_examples' VizdoomEncoder: the image encoder of key `obs` (its measurements head is not mapped)
    (r"(?P<tower>encoder|actor_encoder|critic_encoder)\.basic_encoder\.enc\.conv_head\.(?P<rest>.+)$",
     "{tower}.encoders.obs.conv.{rest}"),
    (r"(?P<tower>encoder|actor_encoder|critic_encoder)\.basic_encoder\.enc\.mlp_layers\.(?P<rest>.+)$",
     "{tower}.encoders.obs.fc.{rest}"),
    (r"(?P<tower>core|actor_core|critic_core)\.core\.(?P<rest>.+)$", "{tower}.rnn.{rest}"),
    (r"(?P<tower>decoder|actor_decoder|critic_decoder)\.mlp\.(?P<rest>.+)$", "{tower}.{rest}"),
    (r"critic_linear\.(?P<rest>.+)$", "value_head.{rest}"),
    (r"action_parameterization\.distribution_linear\.(?P<rest>.+)$", "action_head.linear.{rest}"),
]
# Sample Factory's tower names -> ours (its separate-weights towers carry an `actor_` prefix ours do not).
TOWERS = {"encoder": "encoder", "actor_encoder": "encoder", "critic_encoder": "critic_encoder",
          "core": "core", "actor_core": "core", "critic_core": "critic_core",
          "decoder": "decoder", "actor_decoder": "decoder", "critic_decoder": "critic_decoder"}
# What each Sample Factory part is, for a refusal's message.
PARTS = {"obs_normalizer": "the observation normalizer", "returns_normalizer": "the returns normalizer",
         "encoder": "the encoder", "actor_encoder": "the actor's encoder", "critic_encoder": "the critic's encoder",
         "core": "the recurrent core", "actor_core": "the actor's core", "critic_core": "the critic's core",
         "decoder": "the decoder", "actor_decoder": "the actor's decoder", "critic_decoder": "the critic's decoder",
         "critic_linear": "the value head", "action_parameterization": "the action head"}


class UnmappablePart(ConfigError):
    """A part of a Sample Factory model that has no counterpart in ours (or differs from it in shape)."""

    def __init__(self, part: str, why: str):
        super().__init__("sample_factory_model", part, f"a part our model has the same of: {why}")
        self.part = part


def our_name(sf_name: str) -> Optional[str]:
    """Our state_dict name for Sample Factory's `sf_name`, or None when no prefix of SF_PREFIXES matches."""
    for pattern, template in SF_PREFIXES:
        m = re.match(pattern, sf_name)
        if m:
            groups = m.groupdict()
            if "tower" in groups:
                groups["tower"] = TOWERS[groups["tower"]]
            return template.format(**groups)
    return None


def part_of(sf_name: str) -> str:
    """The Sample Factory part a name belongs to, as a refusal names it (`encoder.basic_encoder ...`)."""
    head = sf_name.split(".")[0]
    what = PARTS.get(head, "a part of a custom model")
    return f"{'.'.join(sf_name.split('.')[:3])} ({what})"


def map_weights(sf_state: Dict[str, torch.Tensor], ours: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Our state_dict (`ours`: a freshly built model's, for names, shapes and dtypes) filled from Sample Factory's
    model state_dict. Raises UnmappablePart naming the first part that has no counterpart, a shape that differs,
    or a part of ours Sample Factory's model does not have."""
    out: Dict[str, torch.Tensor] = {}
    for name, tensor in sf_state.items():
        target = our_name(name)
        if target is None or target not in ours:
            raise UnmappablePart(part_of(name), f"{name} {tuple(tensor.shape)} has no counterpart in our "
                                 f"model{_near(target, ours)}")
        want = ours[target]
        if tensor.numel() != want.numel() or (tuple(tensor.shape) != tuple(want.shape) and tensor.numel() != 1):
            raise UnmappablePart(part_of(name), f"{name} has shape {tuple(tensor.shape)}, our {target} "
                                 f"{tuple(want.shape)}")
        out[target] = tensor.detach().reshape(want.shape).to(want.dtype).clone()
    missing = [k for k in ours if k not in out]
    if missing:
        raise UnmappablePart(missing[0].split(".")[0], f"our model's {', '.join(missing[:4])}"
                             f"{' ...' if len(missing) > 4 else ''} have no counterpart in Sample Factory's "
                             "model")
    return out


def _near(target: Optional[str], ours: Dict[str, torch.Tensor]) -> str:
    """What a refusal adds about where a Sample Factory tensor would have gone, and what ours has there."""
    if target is None:
        return " (no rule of app/sample_factory/weights.py SF_PREFIXES names it)"
    prefix = target.rsplit(".", 1)[0]
    near = [k for k in ours if k.startswith(prefix.split(".")[0])][:4]
    return f" (it would be {target}; ours has {', '.join(near) or 'nothing there'})"


def sf_param_names(sf_state: Dict[str, torch.Tensor]) -> List[str]:
    """Sample Factory's parameters in its optimizer's order: the state_dict's names less its normalizers'
    buffers (torch's Adam numbers the parameters of model.parameters(), registration order, which the
    state_dict keeps)."""
    return [k for k in sf_state if not k.startswith(("obs_normalizer.", "returns_normalizer."))]


def map_adam_state(sf_optimizer: Optional[dict], sf_state: Dict[str, torch.Tensor],
                   our_params: Sequence[str]) -> Dict[int, dict]:
    """Sample Factory's Adam moments (`step`, `exp_avg`, `exp_avg_sq` per parameter) re-indexed to our
    parameters' order (`our_params`: our model's named_parameters names). {} when the checkpoint holds no
    optimizer state, or the state is not Adam's for every parameter (Sample Factory's lamb): training then
    starts with fresh moments."""
    if not sf_optimizer or len(sf_optimizer.get("param_groups", [])) != 1:
        return {}
    names = sf_param_names(sf_state)
    index = {our_name(n): i for i, n in enumerate(names)}
    state = sf_optimizer.get("state", {})
    out = {}
    for j, name in enumerate(our_params):
        s = state.get(index.get(name, -1))
        if s is None or not {"step", "exp_avg", "exp_avg_sq"} <= set(s):
            return {}
        out[j] = {"step": torch.as_tensor(s["step"], dtype=torch.float32).clone(),
                  "exp_avg": s["exp_avg"].clone(), "exp_avg_sq": s["exp_avg_sq"].clone()}
    return out
