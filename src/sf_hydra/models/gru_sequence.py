"""A one-layer GRU over a [B, T] chunk whose rows may end episodes anywhere, for the learner on a CPU.

nn.GRU runs a whole sequence fused, but a reset inside the chunk has to cut it: with short episodes some row
ends at almost every step and the unroll becomes T calls of one step, each projecting its inputs and,
backwards, its weight gradient with small matrix products (the figures: docs/results.md, "The learner's GRU
over a chunk"). Here the input projection of the
whole chunk is one product (x @ W_ih^T, outside, under autograd), the recurrence runs step by step with the
reset as a multiplication of the state, and the backward gathers every step's gate gradients so that the
recurrent weights' gradient is again one product (dG^T @ H over all B x T rows).

The function is nn.GRU's (PyTorch's gate equations, its parameters), the state zeroed after a done:

    h~ = h_{t-1} * keep_{t-1}               (keep = 1 - done; no reset before the first step)
    r = sigmoid(i_r + W_hr h~ + b_hr)      z = sigmoid(i_z + W_hz h~ + b_hz)
    n = tanh(i_n + r * (W_hn h~ + b_hn))   h_t = (1 - z) * n + z * h~

The state and the gate arithmetic are float32; under autocast the recurrent products take its dtype (as
nn.GRU's do under CPU autocast), with W_hh cast once per chunk."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


def gru_chunk(rnn: nn.GRU, x: torch.Tensor, state: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
    """rnn: a one-layer nn.GRU; x [B, T, F]; state [B, H] before the first step; dones [B, T] (the episode ended
    after step t). Returns the outputs [B, T, H] (float32)."""
    gi = F.linear(x, rnn.weight_ih_l0, rnn.bias_ih_l0).float()  # every step's input projection at once
    low = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
    with torch.autocast("cpu", enabled=False):
        keep = 1.0 - dones.float()
        return _GruRecurrence.apply(gi, state.float(), keep, rnn.weight_hh_l0, rnn.bias_hh_l0, low)


class _GruRecurrence(torch.autograd.Function):
    """The recurrence given the input projections gi [B, T, 3H]: outputs [B, T, H]. It keeps each step's
    gates (r, z, n) and recurrent n-part (W_hn h~ + b_hn) for the backward; h~ follows from the outputs."""

    @staticmethod
    def forward(ctx, gi, h0, keep, w_hh, b_hh, low: Optional[torch.dtype]):
        size = gi.shape[2] // 3
        w = w_hh if low is None else w_hh.to(low)
        outs, rzs, ns, recurrent_ns = [], [], [], []
        h = h0
        for t in range(gi.shape[1]):
            if t:
                h = h * keep[:, t - 1 : t]
            gh = _recurrent(h, w, b_hh, low)
            rz = torch.sigmoid(gi[:, t, : 2 * size] + gh[:, : 2 * size])
            n = torch.tanh(torch.addcmul(gi[:, t, 2 * size :], rz[:, :size], gh[:, 2 * size :]))
            h = torch.addcmul(n, rz[:, size:], h - n)
            outs.append(h)
            rzs.append(rz)
            ns.append(n)
            recurrent_ns.append(gh[:, 2 * size :])
        outs = torch.stack(outs, 1)
        ctx.low = low
        ctx.save_for_backward(h0, keep, w, outs, torch.stack(rzs, 1), torch.stack(ns, 1),
                              torch.stack(recurrent_ns, 1))
        return outs

    @staticmethod
    def backward(ctx, d_out):
        h0, keep, w, outs, rzs, ns, recurrent_ns = ctx.saved_tensors
        rows, steps, size = d_out.shape
        # h~ of every step: the state it starts from (the previous output, zeroed after a done)
        before = torch.cat([h0.unsqueeze(1), outs[:, :-1] * keep[:, :-1].unsqueeze(2)], 1)
        d_pre, d_gh = [], []
        dh = torch.zeros_like(d_out[:, 0])
        for t in range(steps - 1, -1, -1):
            dh = dh + d_out[:, t]
            r, z, n = rzs[:, t, :size], rzs[:, t, size:], ns[:, t]
            d_pre_n = dh * (1 - z) * (1 - n * n)
            d_pre_z = dh * (before[:, t] - n) * z * (1 - z)
            d_pre_r = d_pre_n * recurrent_ns[:, t] * r * (1 - r)
            d_recurrent = torch.cat([d_pre_r, d_pre_z, d_pre_n * r], 1)
            d_pre.append(torch.cat([d_pre_r, d_pre_z, d_pre_n], 1))
            d_gh.append(d_recurrent)
            dh = _back_through(d_recurrent, w, ctx.low).add_(dh * z)  # d h~
            if t:
                dh = dh * keep[:, t - 1 : t]
        d_gi = torch.stack(d_pre[::-1], 1)
        flat = torch.stack(d_gh[::-1], 1).reshape(rows * steps, 3 * size)
        # every step's recurrent weight gradient as one product
        d_w = _product(flat.t(), before.reshape(rows * steps, size), ctx.low)
        return d_gi, dh, None, d_w, flat.sum(0), None


def _recurrent(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor, low: Optional[torch.dtype]) -> torch.Tensor:
    """W_hh h + b_hh for the rows' states h (float32), the product in `low` when given."""
    if low is None:
        return torch.addmm(b, h, w.t())
    return torch.mm(h.to(low), w.t()).float().add_(b)


def _back_through(d_gh: torch.Tensor, w: torch.Tensor, low: Optional[torch.dtype]) -> torch.Tensor:
    """The gradient reaching h~ through the recurrent product: d_gh @ W_hh (float32 out)."""
    if low is None:
        return d_gh @ w
    return torch.mm(d_gh.to(low), w).float()


def _product(a: torch.Tensor, b: torch.Tensor, low: Optional[torch.dtype]) -> torch.Tensor:
    """a @ b (float32 out), in `low` when given."""
    return a @ b if low is None else torch.mm(a.to(low), b.to(low)).float()
