"""The fields a transition carries, declared once.

A `TrajectorySpec` lists every field with its per-step shape and dtype, derived from the
env's spaces and the model. Everything on the path of a sample loops over it:

- the shared buffers are allocated from it (`TrajectoryBuffers.allocate`): one tensor per
  field, `[slots, rollout, *shape]`, or `rollout + 1` steps for a field with a bootstrap
  step (the value of the observation after the last step);
- both rollout workers write a record (`{name: tensor}`) at a time, whichever fields the
  record holds: the agent-rows worker through a `TrajectoryWriter` into the buffers, the
  single-agent worker into its `RolloutStaging`, copied into the buffers once per rollout;
- the learner's batch holds one tensor per field (`gather`), and the learner cuts every
  field into recurrence chunks by the same loop (`Field.chunk_start_only` keeps only the
  first step of each chunk, for RNN states).

Adding a field is one `Field` here (or in a model's `extra_trajectory_fields`), a producer
that puts it in a record and a consumer that reads `batch[name]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import gymnasium as gym
import torch

from sf_hydra.core.spaces import action_spec, obs_specs

OBS_PREFIX = "obs."


@dataclass(frozen=True)
class Field:
    """One per-step entry of a transition. Invariant: a buffer of this field is
    `[slots, steps, *shape]` of `dtype`, with `steps = rollout + 1` if `bootstrap` else `rollout`."""

    name: str
    shape: Tuple[int, ...] = ()
    dtype: torch.dtype = torch.float32
    bootstrap: bool = False  # one step more than the rollout: the value after its last step
    chunk_start_only: bool = False  # the learner needs only the first step of each recurrence chunk

    def steps(self, rollout: int) -> int:
        return rollout + 1 if self.bootstrap else rollout


def obs_field_name(key: str) -> str:
    return OBS_PREFIX + key


def obs_fields_of(batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The observation dict (`{key: tensor}`) held by a record or a batch."""
    return {k[len(OBS_PREFIX):]: v for k, v in batch.items() if k.startswith(OBS_PREFIX)}


class TrajectorySpec:
    """An ordered set of fields, looked up by name."""

    def __init__(self, fields: Iterable[Field]):
        self.fields: Dict[str, Field] = {}
        for f in fields:
            if f.name in self.fields:
                raise ValueError(f"trajectory field {f.name!r} declared twice")
            self.fields[f.name] = f

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields.values())

    def __contains__(self, name: str) -> bool:
        return name in self.fields

    def __getitem__(self, name: str) -> Field:
        return self.fields[name]

    def names(self) -> List[str]:
        return list(self.fields)


ACTION_DIST_PARAMS = "action_dist_params"


def trajectory_spec(obs_space: gym.Space, action_space: gym.Space, rnn_state_size: int,
                    extra_fields: Iterable[Field] = (), num_policies: int = 1,
                    action_dist_params_size: int = 0) -> TrajectorySpec:
    """The standard fields for these spaces, then `extra_fields` (a model's own outputs).

    Observations: one field per key (`obs.<key>`; a plain Box is the key `obs`). Policy step:
    the action, its log-probability under the acting policy, the value estimate (with the
    bootstrap step), the version of the acting policy and, for recurrent models, the RNN
    state before the step. Env step: the scaled and clipped reward, `dones` (the episode
    ended after this step) and `time_outs` (that end was a truncation). With several policies,
    `policy_ids`: the policy that acted (a slot may hold episodes of several policies; policies
    change only at episode ends, so every change follows a done). With
    `action_dist_params_size` > 0, `action_dist_params`: the acting policy's action
    distribution as a flat vector (its logits, or means then stds), for the learner's exact KL
    to the behaviour policy; recorded only when a loss reads it (algo.kl_loss_coeff > 0)."""
    a_shape, a_dtype = action_spec(action_space)
    fields = [Field(obs_field_name(k), tuple(shape), dtype) for k, (shape, dtype) in obs_specs(obs_space).items()]
    fields += [
        Field("actions", tuple(a_shape), a_dtype),
        Field("log_probs"),
        Field("values", bootstrap=True),
        Field("policy_versions", dtype=torch.int64),
        Field("rewards"),
        Field("dones"),
        Field("time_outs"),
    ]
    if num_policies > 1:
        fields.append(Field("policy_ids", dtype=torch.int64))
    if rnn_state_size:
        fields.append(Field("rnn_states", (rnn_state_size,), chunk_start_only=True))
    if action_dist_params_size:
        fields.append(Field(ACTION_DIST_PARAMS, (action_dist_params_size,)))
    return TrajectorySpec([*fields, *extra_fields])


def model_trajectory_spec(obs_space: gym.Space, action_space: gym.Space, model: torch.nn.Module,
                          num_policies: int = 1) -> TrajectorySpec:
    """The spec of what `model` (or any of `num_policies` policies of its class) acting in an
    env with these spaces records."""
    extra = model.extra_trajectory_fields() if hasattr(model, "extra_trajectory_fields") else ()
    return trajectory_spec(obs_space, action_space, model.rnn_state_size, extra, num_policies,
                           getattr(model, "action_dist_params_size", 0))


class TrajectoryBuffers:
    """One shared-memory tensor per field, allocated once: `tensors[name]` is
    `[num_slots, field.steps(rollout), *field.shape]`. One slot holds one trajectory row."""

    def __init__(self, spec: TrajectorySpec, rollout: int, tensors: Dict[str, torch.Tensor]):
        self.spec, self.rollout, self.tensors = spec, rollout, tensors

    @classmethod
    def allocate(cls, spec: TrajectorySpec, num_slots: int, rollout: int) -> "TrajectoryBuffers":
        tensors = {f.name: torch.zeros((num_slots, f.steps(rollout), *f.shape), dtype=f.dtype).share_memory_()
                   for f in spec}
        return cls(spec, rollout, tensors)

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.tensors[name]

    def gather(self, slots: torch.Tensor, out: Optional[Dict[str, torch.Tensor]] = None) -> Dict[str, torch.Tensor]:
        """Copies the given slots out into one batch, a tensor per field (the slots can be
        reused at once). `out`: per field a tensor of at least len(slots) slots to copy into
        (pinned staging memory for a CUDA learner); the batch is then views of its first rows."""
        if out is None:
            return {name: t.index_select(0, slots) for name, t in self.tensors.items()}
        n = len(slots)
        return {name: torch.index_select(t, 0, slots, out=out[name][:n]) for name, t in self.tensors.items()}

    def staging(self, num_slots: int, pin: bool) -> Dict[str, torch.Tensor]:
        """Empty per-field tensors of num_slots slots to gather into (`gather(out=...)`); pinned
        (page-locked) when `pin`, so a copy to CUDA is one non-blocking DMA transfer."""
        return {name: torch.empty((num_slots, *t.shape[1:]), dtype=t.dtype, pin_memory=pin)
                for name, t in self.tensors.items()}


class TrajectoryWriter:
    """Writes records into the buffers by (slot, step) positions (the agent-rows worker, whose
    rows may be at different steps); a record holds any of the spec's fields, each a tensor of
    rows (converted to the field's dtype if it differs) or one number for every row."""

    def __init__(self, buffers: TrajectoryBuffers):
        self.tensors = buffers.tensors

    def write(self, slots: torch.Tensor, steps, record: Mapping[str, object],
              select: Optional[torch.Tensor] = None) -> None:
        """Row i of every `record` value goes to (slots[i], steps[i]) (`steps`: a tensor, or one
        step for all rows). `select`: the rows of the record's tensors to write (None: all)."""
        for name, value in record.items():
            buffer = self.tensors[name]
            if isinstance(value, torch.Tensor):
                if select is not None:
                    value = value.index_select(0, select)
                if value.dtype != buffer.dtype:
                    value = value.to(buffer.dtype)
            buffer[slots, steps] = value


class RolloutStaging:
    """A worker's own copy of its rows' current rollout: records are written step by step with
    plain slicing into numpy views (about 0.5 us a field, against about 5 us for an indexed
    write into the shared buffers), and the whole rollout goes into the rows' slots at once
    (`flush`: one indexed copy per field and rollout, instead of one per field and step).
    Invariant: the learner reads a slot only after the worker's message, which follows the
    flush, so it sees what direct writes would have left there."""

    def __init__(self, buffers: TrajectoryBuffers, rows: int):
        self.buffers = buffers.tensors
        self.tensors = {name: torch.zeros((rows, *t.shape[1:]), dtype=t.dtype) for name, t in self.buffers.items()}
        # numpy views, None for a dtype numpy lacks (bfloat16, float8): such a field is written through torch
        self.arrays = {name: _numpy_view(t) for name, t in self.tensors.items()}

    def write(self, rows: slice, step: int, record: Mapping[str, object]) -> None:
        """Row i of every `record` value goes to row rows.start + i at `step` (a tensor of rows,
        converted to the field's dtype if it differs, or one number for every row)."""
        for name, value in record.items():
            array = self.arrays[name]
            if isinstance(value, torch.Tensor):
                if value.dtype != self.tensors[name].dtype:
                    value = value.to(self.tensors[name].dtype)
                if array is not None:
                    value = (value.detach() if value.requires_grad else value).numpy()
            if array is None:
                self.tensors[name][rows, step] = value
            else:
                array[rows, step] = value

    def flush(self, slots: torch.Tensor) -> None:
        """Row i's rollout, every field and step, into slot slots[i]."""
        n = len(slots)
        for name, buffer in self.buffers.items():
            buffer[slots] = self.tensors[name][:n]


def _numpy_view(t: torch.Tensor):
    try:
        return t.numpy()
    except TypeError:  # a dtype numpy has no counterpart for
        return None
