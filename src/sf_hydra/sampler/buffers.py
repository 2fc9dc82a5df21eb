"""Trajectory buffers in shared memory, allocated once from the env's spaces.

One slot holds one env's trajectory of `rollout` steps. Rollout workers write into slots
they own; only slot indices travel through queues.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import torch

from sf_hydra.spaces import Spec


@dataclass
class TrajectoryBuffers:
    obs: Dict[str, torch.Tensor]  # [N, T, *shape]
    actions: torch.Tensor  # [N, T, *action_shape]
    log_probs: torch.Tensor  # [N, T] behaviour policy log pi(a|s)
    values: torch.Tensor  # [N, T + 1] the last column bootstraps the trajectory
    rewards: torch.Tensor  # [N, T] already scaled and clipped
    dones: torch.Tensor  # [N, T] 1.0 when the episode ended after step t
    time_outs: torch.Tensor  # [N, T] 1.0 when that end was a truncation
    policy_versions: torch.Tensor  # [N, T] version of the policy that acted
    rnn_states: torch.Tensor  # [N, T, S] state before step t (S = 0 without RNN)

    @classmethod
    def allocate(cls, num_slots: int, rollout: int, obs_specs: Dict[str, Spec], action_spec: Spec, rnn_state_size: int):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype).share_memory_()

        a_shape, a_dtype = action_spec
        return cls(
            obs={k: zeros(num_slots, rollout, *shape, dtype=dt) for k, (shape, dt) in obs_specs.items()},
            actions=zeros(num_slots, rollout, *a_shape, dtype=a_dtype),
            log_probs=zeros(num_slots, rollout),
            values=zeros(num_slots, rollout + 1),
            rewards=zeros(num_slots, rollout),
            dones=zeros(num_slots, rollout),
            time_outs=zeros(num_slots, rollout),
            policy_versions=zeros(num_slots, rollout, dtype=torch.int64),
            rnn_states=zeros(num_slots, rollout, rnn_state_size),
        )

    def gather(self, slots: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Copies the given slots out into one batch (the slots can be reused at once)."""
        batch = {f"obs.{k}": v.index_select(0, slots) for k, v in self.obs.items()}
        for name in ("actions", "log_probs", "values", "rewards", "dones", "time_outs", "policy_versions"):
            batch[name] = getattr(self, name).index_select(0, slots)
        if self.rnn_states.shape[-1]:
            batch["rnn_states"] = self.rnn_states.index_select(0, slots)
        return batch
