"""An encoder of your own: `model.encoder._target_: examples.custom_env.grid_encoder.GridConv`.

The target is called with the observation shapes (a dict: key -> shape; a plain Box is the
key "obs"), the `model` node (its schema's `ModelConfig`: read keys as attributes) and the
node's other keys (here `channels`), and returns
a module that maps the dict of (already scaled) observation tensors to [batch, out_size]
features and sets `out_size`.
"""

from __future__ import annotations

from torch import nn


class GridConv(nn.Module):
    """One padded 3x3 conv keeps every cell's neighbourhood, then one dense layer: enough for
    small grids, where the strided Atari/Doom nets would shrink the image to nothing."""

    def __init__(self, obs_shapes, model_cfg, channels: int = 16):
        super().__init__()
        c, h, w = obs_shapes["obs"]
        features = model_cfg.encoder_conv_mlp_layers[-1]
        self.net = nn.Sequential(
            nn.Conv2d(c, channels, 3, padding=1), nn.ReLU(), nn.Flatten(),
            nn.Linear(channels * h * w, features), nn.ReLU(),
        )
        self.out_size = features

    def forward(self, obs):
        return self.net(obs["obs"])
