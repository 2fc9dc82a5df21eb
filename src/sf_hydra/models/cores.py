"""Recurrent cores. State is a flat [B, state_size] tensor so the sampler can store it in
one buffer whatever the cell (LSTM keeps h and c side by side)."""

from __future__ import annotations

import torch
from torch import nn

from sf_hydra.models.gru_sequence import gru_chunk


class RnnCore(nn.Module):
    def __init__(self, in_size: int, rnn_type: str, size: int, num_layers: int):
        super().__init__()
        cls = nn.GRU if rnn_type == "gru" else nn.LSTM
        self.rnn = cls(in_size, size, num_layers=num_layers)
        self.is_lstm = rnn_type == "lstm"
        self.num_layers, self.size = num_layers, size
        self.out_size = size
        self.state_size = size * num_layers * (2 if self.is_lstm else 1)

    def _unflatten(self, state: torch.Tensor):
        b = state.shape[0]
        s = state.reshape(b, -1, self.num_layers, self.size).permute(1, 2, 0, 3).contiguous()
        return (s[0], s[1]) if self.is_lstm else s[0]

    def _flatten(self, state) -> torch.Tensor:
        s = torch.stack(state) if self.is_lstm else state.unsqueeze(0)
        return s.permute(2, 0, 1, 3).reshape(s.shape[2], -1)

    def step(self, x: torch.Tensor, state: torch.Tensor):
        """One time step for a batch: x [B, F], state [B, S]. In a core whose weights are bfloat16 (acting,
        ActorCritic.act_in_bf16) x and the state are cast to them and the new state comes back in the
        state's own dtype, so what the sampler stores keeps its precision between steps."""
        weights = self.rnn.weight_ih_l0.dtype
        if x.dtype == weights and state.dtype == weights:
            out, new = self.rnn(x.unsqueeze(0), self._unflatten(state))
            return out.squeeze(0), self._flatten(new)
        out, new = self.rnn(x.to(weights).unsqueeze(0), self._unflatten(state.to(weights)))
        return out.squeeze(0), self._flatten(new).to(state.dtype)

    def unroll(self, x: torch.Tensor, state: torch.Tensor, dones: torch.Tensor):
        """x [B, T, F], first state [B, S], dones [B, T] (episode ended after step t):
        the state is zeroed after a done, so one chunk may span episode boundaries.

        The time axis is cut only after the steps where some row is done; each stretch in
        between runs as one fused RNN call over all rows (far cheaper than a call per step,
        and the same function: the reset is a multiplication of the state at the cut). A one-layer GRU on the
        CPU runs models/gru_sequence.py instead: with a reset at most steps (short episodes) the cuts leave
        one-step calls, where it keeps the input projection and the weight gradient whole-chunk products."""
        if not self.is_lstm and self.num_layers == 1 and x.device.type == "cpu":
            return gru_chunk(self.rnn, x, state, dones)
        xs = x.transpose(0, 1)
        cuts = torch.nonzero(dones[:, :-1].any(dim=0)).flatten().add(1).tolist()
        h, outs, start = self._unflatten(state), [], 0
        for end in cuts + [x.shape[1]]:
            out, h = self.rnn(xs[start:end], h)
            outs.append(out)
            if end < x.shape[1]:
                keep = (1.0 - dones[:, end - 1]).view(1, -1, 1)  # rows done at step end-1 start afresh
                h = (h[0] * keep, h[1] * keep) if self.is_lstm else h * keep
            start = end
        return torch.cat(outs, dim=0).transpose(0, 1)


def rnn_core(in_size: int, model_cfg) -> RnnCore:
    """The default `model.core`: a GRU or LSTM of `model.rnn_type`, `rnn_size`, `rnn_num_layers`.
    A user's core is called the same way and offers RnnCore's `out_size`, `state_size`,
    `step` and `unroll`."""
    return RnnCore(in_size, model_cfg.rnn_type, model_cfg.rnn_size, model_cfg.rnn_num_layers)
