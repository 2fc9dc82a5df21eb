"""Typed `env` node of the mujoco family (no mujoco import: the schema must load without it)."""

from dataclasses import dataclass
from typing import Optional

from sf_hydra.config.schema import EnvConfig


@dataclass
class MujocoEnvConfig(EnvConfig):
    """A gymnasium MuJoCo task (`id`: HalfCheetah-v5, ...). Task arguments the keys below do
    not cover (ctrl_cost_weight, xml_file, ...) go in `kwargs`, checked against the task's own."""

    family: str = "mujoco"
    # float32: the tasks return float64; this halves the shared buffers, the model computes in float32
    float32_observations: bool = True
    reset_noise_scale: Optional[float] = None  # noise on the initial state; None keeps the task's own
    render_width: int = 480  # frames for render_mode=rgb_array (evaluation videos)
    render_height: int = 480  # height of those frames
