"""models/gru_sequence.py: the learner's GRU over a chunk with episode ends inside is nn.GRU's function, stepped
one step at a time with the state zeroed after a done, and so are its gradients (inputs, first state, all four
parameters); the recurrent core's unroll runs it for a one-layer GRU on the CPU."""

import pytest
import torch

from sf_hydra.models.cores import RnnCore
from sf_hydra.models.gru_sequence import gru_chunk

ROWS, STEPS, IN, SIZE = 5, 12, 24, 16


def _core(seed: int = 0) -> RnnCore:
    torch.manual_seed(seed)
    return RnnCore(IN, "gru", SIZE, 1)


def _by_definition(rnn, x, state, dones):
    """nn.GRU one step at a time; after a row's done its state restarts at zero."""
    h, outs = state, []
    for t in range(x.shape[1]):
        if t:
            h = h * (1.0 - dones[:, t - 1 : t])
        _, h = rnn(x[:, t : t + 1].transpose(0, 1), h.unsqueeze(0))
        h = h.squeeze(0)
        outs.append(h)
    return torch.stack(outs, 1)


DONES = {
    "none": torch.zeros(ROWS, STEPS),
    "every step": torch.ones(ROWS, STEPS),
    "random": (torch.rand(ROWS, STEPS, generator=torch.Generator().manual_seed(3)) < 0.3).float(),
    "first and last": torch.zeros(ROWS, STEPS).index_fill_(1, torch.tensor([0, STEPS - 1]), 1.0),
}


@pytest.mark.parametrize("case", list(DONES))
def test_outputs_and_every_gradient_are_the_stepped_grus(case):
    core, dones = _core(), DONES[case]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(ROWS, STEPS, IN, generator=g, requires_grad=True)
    state = torch.randn(ROWS, SIZE, generator=g, requires_grad=True)
    weights = torch.randn(ROWS, STEPS, SIZE, generator=g)  # a loss that weighs every output differently
    inputs = [x, state, *core.rnn.parameters()]
    want = _by_definition(core.rnn, x, state, dones)
    got = gru_chunk(core.rnn, x, state, dones)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    want_grads = torch.autograd.grad((want * weights).sum(), inputs)
    got_grads = torch.autograd.grad((got * weights).sum(), inputs)
    for name, a, b in zip(["x", "state", "w_ih", "w_hh", "b_ih", "b_hh"], got_grads, want_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4, msg=name)


def test_under_bf16_autocast_it_is_the_float32_function_to_bf16s_precision():
    core, dones = _core(), DONES["random"]
    g = torch.Generator().manual_seed(2)
    x, state = torch.randn(ROWS, STEPS, IN, generator=g), torch.randn(ROWS, SIZE, generator=g)
    exact = gru_chunk(core.rnn, x, state, dones)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = gru_chunk(core.rnn, x, state, dones)
    assert low.dtype == torch.float32 and not torch.equal(low, exact)
    torch.testing.assert_close(low, exact, atol=0.03, rtol=0.03)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        grads = torch.autograd.grad(gru_chunk(core.rnn, x, state, dones).sum(), list(core.rnn.parameters()))
    exact_grads = torch.autograd.grad(exact.sum(), list(core.rnn.parameters()))
    for a, b in zip(grads, exact_grads):
        torch.testing.assert_close(a, b, atol=0.05 * b.abs().max().item(), rtol=0.05)


def test_the_cores_unroll_runs_it_for_a_one_layer_gru_and_keeps_nn_gru_otherwise():
    x = torch.randn(ROWS, STEPS, IN, requires_grad=True)
    state, dones = torch.zeros(ROWS, SIZE), DONES["random"]
    out = _core().unroll(x, state, dones)
    assert type(out.grad_fn).__name__ == "_GruRecurrenceBackward"
    torch.testing.assert_close(out, _by_definition(_core().rnn, x, state, dones), atol=1e-6, rtol=1e-5)
    lstm = RnnCore(IN, "lstm", SIZE, 1)
    assert "GruRecurrence" not in type(lstm.unroll(x, torch.zeros(ROWS, lstm.state_size), dones).grad_fn).__name__
