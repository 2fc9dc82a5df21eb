"""The conv stack hands its last activation channels-first feature maps whatever the input's layout (RowMajor):
the learner's channels-last image batches then take the activation's fast backward path, with the same function,
the same gradients and the same parameter names as before (checkpoints load)."""

import pytest
import torch

from sf_hydra.models.encoders import CONV_ARCHITECTURES, RESNET_ARCHITECTURES, ConvEncoder

ARCHITECTURES = sorted(CONV_ARCHITECTURES) + sorted(RESNET_ARCHITECTURES)


def last_activation(enc: ConvEncoder) -> torch.nn.Module:
    return enc.conv[-2]  # the stack ends: ..., activation, Flatten


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_a_channels_last_batch_reaches_the_last_activation_channels_first(arch):
    enc = ConvEncoder((3, 72, 128), arch, [16], "elu")
    seen = []
    last_activation(enc).register_forward_pre_hook(lambda mod, args: seen.append(args[0].is_contiguous()))
    x = torch.rand(4, 3, 72, 128).contiguous(memory_format=torch.channels_last)
    enc(x).sum().backward()
    assert isinstance(last_activation(enc), torch.nn.ELU) and seen == [True]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_function_and_gradients_do_not_depend_on_the_input_layout(arch):
    torch.manual_seed(0)
    enc = ConvEncoder((3, 72, 128), arch, [16], "elu")
    x = torch.rand(4, 3, 72, 128)
    outs, grads = [], []
    for batch in (x, x.contiguous(memory_format=torch.channels_last)):
        enc.zero_grad()
        out = enc(batch)
        out.square().sum().backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in enc.parameters()])
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_parameter_names_are_those_checkpoints_hold():
    enc = ConvEncoder((3, 72, 128), "convnet_simple", [512], "elu")
    assert [k for k in enc.state_dict()] == [
        "conv.0.weight", "conv.0.bias", "conv.2.weight", "conv.2.bias", "conv.4.weight", "conv.4.bias",
        "fc.0.weight", "fc.0.bias"]
