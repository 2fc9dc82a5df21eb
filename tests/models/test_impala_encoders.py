"""IMPALA's encoders (Espeholt et al. 2018, figure 3): the shallow convnet_impala and the deep
resnet_impala, as choices of model.encoder_conv_architecture."""

import pytest
import torch

from sf_hydra.models.encoders import ConvEncoder, ResidualBlock

# Output sizes derived by hand from the layer definitions:
# convnet_impala: conv 8x8/4 then 4x4/2, no padding: floor((n - k) / s) + 1 per conv.
#   84 -> 20 -> 9;  72 -> 17 -> 7 and 128 -> 31 -> 14.
# resnet_impala: each stage's max-pool 3x3/2 with padding 1 halves a side, rounded up.
#   84 -> 42 -> 21 -> 11;  72 -> 36 -> 18 -> 9 and 128 -> 64 -> 32 -> 16.
FLAT_SIZES = {
    ("convnet_impala", (3, 84, 84)): 32 * 9 * 9,
    ("convnet_impala", (3, 72, 128)): 32 * 7 * 14,
    ("resnet_impala", (3, 84, 84)): 32 * 11 * 11,
    ("resnet_impala", (3, 72, 128)): 32 * 9 * 16,
}


@pytest.mark.parametrize("arch,shape", list(FLAT_SIZES), ids=lambda v: str(v))
def test_flat_size_and_mlp_output(arch, shape):
    enc = ConvEncoder(shape, arch, [64], "relu")
    assert enc.fc[0].in_features == FLAT_SIZES[(arch, shape)]
    out = enc(torch.rand(2, *shape))
    assert out.shape == (2, 64) and enc.out_size == 64


def test_convnet_impala_layers():
    convs = [m for m in ConvEncoder((4, 84, 84), "convnet_impala", [], "relu").modules()
             if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (4, 16, (8, 8), (4, 4)), (16, 32, (4, 4), (2, 2))]


def test_resnet_impala_structure():
    enc = ConvEncoder((3, 84, 84), "resnet_impala", [], "relu")
    blocks = [m for m in enc.modules() if isinstance(m, ResidualBlock)]
    pools = [m for m in enc.modules() if isinstance(m, torch.nn.MaxPool2d)]
    assert len(blocks) == 6 and len(pools) == 3
    assert [b.body[1].out_channels for b in blocks] == [16, 16, 32, 32, 32, 32]
    assert enc.out_size == 32 * 11 * 11  # no MLP: the flat features


def test_residual_block_with_zero_weights_is_identity():
    block = ResidualBlock(8, "relu")
    for p in block.parameters():
        torch.nn.init.zeros_(p)
    x = torch.randn(3, 8, 5, 7)
    assert torch.equal(block(x), x)


def test_residual_block_adds_its_body_to_the_input():
    torch.manual_seed(0)
    block = ResidualBlock(4, "relu")
    x = torch.randn(2, 4, 6, 6)
    relu, c1, c2 = torch.relu, block.body[1], block.body[3]
    assert torch.allclose(block(x), x + c2(relu(c1(relu(x)))))


@pytest.mark.parametrize("arch", ["convnet_impala", "resnet_impala"])
def test_gradients_reach_every_parameter(arch):
    torch.manual_seed(0)
    enc = ConvEncoder((3, 72, 128), arch, [32], "relu")
    enc(torch.rand(4, 3, 72, 128)).square().sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_architecture_is_a_config_choice(tmp_cfg):
    import gymnasium as gym
    import numpy as np

    from sf_hydra.models import build_model, model_recipe

    cfg = tmp_cfg("model.encoder_conv_architecture=resnet_impala", "model.encoder_conv_mlp_layers=[16]")
    space = gym.spaces.Box(0, 255, (3, 72, 128), np.uint8)
    model = build_model(model_recipe(cfg), space, gym.spaces.Discrete(3))
    assert any(isinstance(m, ResidualBlock) for m in model.modules())
    out = model.act({"obs": torch.randint(0, 255, (2, 3, 72, 128), dtype=torch.uint8)}, None)
    assert out.actions.shape == (2,)
