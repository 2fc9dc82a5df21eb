"""An encoder of your own, registered from your own module: `model.encoder=grid_conv`.

A factory gets the observation shapes (a dict: key -> shape; a plain Box is the key "obs")
and the `model` config node, and returns a module that maps the dict of (already scaled)
observation tensors to [batch, out_size] features and sets `out_size`.
"""

from __future__ import annotations

from torch import nn

from sf_hydra.models.encoders import register_encoder


class GridConv(nn.Module):
    """One padded 3x3 conv keeps every cell's neighbourhood, then one dense layer: enough for
    small grids, where the strided Atari/Doom nets would shrink the image to nothing."""

    def __init__(self, shape, channels: int, features: int):
        super().__init__()
        c, h, w = shape
        self.net = nn.Sequential(
            nn.Conv2d(c, channels, 3, padding=1), nn.ReLU(), nn.Flatten(),
            nn.Linear(channels * h * w, features), nn.ReLU(),
        )
        self.out_size = features

    def forward(self, obs):
        return self.net(obs["obs"])


def make_grid_conv(obs_shapes, model_cfg) -> GridConv:
    return GridConv(obs_shapes["obs"], channels=16, features=model_cfg.encoder_conv_mlp_layers[-1])


register_encoder("grid_conv", make_grid_conv)
