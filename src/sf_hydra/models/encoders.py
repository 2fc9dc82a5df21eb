"""Observation encoders: MLP for vectors, conv nets for images, one per Dict key.

`model.encoder` is a `_target_` node (default: `MultiKeyEncoder`); a user's encoder is the
dotted path of a class or function called as `target(obs_shapes, model_cfg, **node_keys)`,
returning a module that maps the dict of (already scaled) observation tensors to
[batch, out_size] features and has an int attribute `out_size`."""

from __future__ import annotations

from typing import Dict, List, Sequence

import torch
from torch import nn

from sf_hydra.core.targets import build

ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh}

# (out_channels, kernel, stride) per layer.
CONV_ARCHITECTURES: Dict[str, List[tuple]] = {
    "convnet_simple": [(32, 8, 4), (64, 4, 2), (128, 3, 2)],
    "convnet_atari": [(32, 8, 4), (64, 4, 2), (64, 3, 1)],
    "convnet_impala": [(16, 8, 4), (32, 4, 2)],  # IMPALA's shallow net (Espeholt et al. 2018, fig. 3 left)
}

# IMPALA's deep residual net (fig. 3 right): per stage (out_channels, residual blocks).
RESNET_ARCHITECTURES: Dict[str, List[tuple]] = {
    "resnet_impala": [(16, 2), (32, 2), (32, 2)],
}


def mlp(in_size: int, layers: Sequence[int], activation: str) -> nn.Sequential:
    mods, size = [], in_size
    for width in layers:
        mods += [nn.Linear(size, width), ACTIVATIONS[activation]()]
        size = width
    return nn.Sequential(*mods)


class ResidualBlock(nn.Module):
    """x + conv(act(conv(act(x)))), 3x3 convs that keep the shape: the identity when both
    convs' weights and biases are zero."""

    def __init__(self, channels: int, activation: str):
        super().__init__()
        act = ACTIVATIONS[activation]
        self.body = nn.Sequential(act(), nn.Conv2d(channels, channels, 3, padding=1),
                                  act(), nn.Conv2d(channels, channels, 3, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def resnet_stage(in_ch: int, out_ch: int, blocks: int, activation: str) -> nn.Sequential:
    """conv 3x3 (same size) -> max-pool 3x3 stride 2 (halves height and width, rounded up) ->
    `blocks` residual blocks."""
    mods = [nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.MaxPool2d(3, stride=2, padding=1)]
    return nn.Sequential(*mods, *(ResidualBlock(out_ch, activation) for _ in range(blocks)))


class RowMajor(nn.Module):
    """The feature maps laid out channels-first (NCHW), as the flatten after them reads them. The learner's
    image batches are channels-last; without it the last activation's backward gets its result channels-last
    and its gradient (from the flatten) channels-first, a mix that costs several times its forward pass. A
    no-op for a batch already channels-first (acting)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.contiguous()


def conv_stack(in_ch: int, architecture: str, activation: str) -> List[nn.Module]:
    """The layers of `architecture` (a plain conv stack or a residual net), then RowMajor, activation last."""
    mods = []
    if architecture in RESNET_ARCHITECTURES:
        for out_ch, blocks in RESNET_ARCHITECTURES[architecture]:
            mods.append(resnet_stage(in_ch, out_ch, blocks, activation))
            in_ch = out_ch
        return mods + [RowMajor(), ACTIVATIONS[activation]()]
    for out_ch, kernel, stride in CONV_ARCHITECTURES[architecture]:
        mods += [nn.Conv2d(in_ch, out_ch, kernel, stride), ACTIVATIONS[activation]()]
        in_ch = out_ch
    return mods[:-1] + [RowMajor(), mods[-1]]


class ConvEncoder(nn.Module):
    """The conv stack of `architecture`, flattened, then the `fc_layers` MLP."""

    def __init__(self, shape: Sequence[int], architecture: str, fc_layers: Sequence[int], activation: str):
        super().__init__()
        self.conv = nn.Sequential(*conv_stack(shape[0], architecture, activation), nn.Flatten())
        with torch.no_grad():
            flat = self.conv(torch.zeros(1, *shape)).shape[1]
        self.fc = mlp(flat, fc_layers, activation)
        self.out_size = fc_layers[-1] if fc_layers else flat

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


class MlpEncoder(nn.Module):
    def __init__(self, shape: Sequence[int], layers: Sequence[int], activation: str):
        super().__init__()
        in_size = int(torch.tensor(shape).prod()) if len(shape) else 1
        self.net = nn.Sequential(nn.Flatten(), mlp(in_size, layers, activation))
        self.out_size = layers[-1] if layers else in_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.reshape(x.shape[0], -1))


class MultiKeyEncoder(nn.Module):
    """Encodes each observation key (3-D keys with a conv net, others with an MLP) and
    concatenates the features."""

    def __init__(self, obs_shapes: Dict[str, Sequence[int]], model_cfg):
        super().__init__()
        act = model_cfg.nonlinearity
        self.encoders = nn.ModuleDict()
        for key, shape in obs_shapes.items():
            if len(shape) == 3:
                enc = ConvEncoder(shape, model_cfg.encoder_conv_architecture, model_cfg.encoder_conv_mlp_layers, act)
            else:
                enc = MlpEncoder(shape, model_cfg.encoder_mlp_layers, act)
            self.encoders[key] = enc
        self.out_size = sum(e.out_size for e in self.encoders.values())

    def forward(self, obs: Dict[str, torch.Tensor]) -> torch.Tensor:
        feats = [enc(obs[key]) for key, enc in self.encoders.items()]
        return feats[0] if len(feats) == 1 else torch.cat(feats, dim=1)


def make_encoder(obs_shapes: Dict[str, Sequence[int]], model_cfg) -> nn.Module:
    """The encoder `model_cfg.encoder` names, checked for its `out_size`."""
    encoder = build("model.encoder", model_cfg.encoder, obs_shapes, model_cfg)
    if not isinstance(getattr(encoder, "out_size", None), int):
        target = model_cfg.encoder["_target_"]
        raise TypeError(f"encoder {target!r} must set an int attribute `out_size` (its feature size)")
    return encoder
