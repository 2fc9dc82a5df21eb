"""What to allocate for an env's spaces, and the shapes a model reads from them. Observations always become a dict
of arrays (a plain Box is the key "obs"), actions one array per step."""

from __future__ import annotations

from typing import Dict, Tuple

import gymnasium as gym
import numpy as np
import torch

Spec = Tuple[tuple, torch.dtype]


def discrete_sizes(space: gym.Space) -> list:
    """The number of choices of each categorical in a discrete action space."""
    if isinstance(space, gym.spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(space.nvec).ravel()]
    if isinstance(space, gym.spaces.Tuple) and all(isinstance(s, gym.spaces.Discrete) for s in space.spaces):
        return [int(s.n) for s in space.spaces]
    raise TypeError(f"not a discrete action space: {space}")


# The observation key through which an env masks its discrete actions (as Sample Factory):
# one entry per discrete action (the concatenated choices of every categorical), 1 = allowed.
ACTION_MASK = "action_mask"


def is_mixed_tuple(space: gym.Space) -> bool:
    """A Tuple of Discrete and Box parts with at least one Box (a Tuple of Discretes only is
    handled as a MultiDiscrete)."""
    if not isinstance(space, gym.spaces.Tuple):
        return False
    parts = space.spaces
    return (all(isinstance(s, gym.spaces.Discrete | gym.spaces.Box) for s in parts)
            and any(isinstance(s, gym.spaces.Box) for s in parts))


def tuple_action_widths(space: gym.spaces.Tuple) -> list:
    """Numbers each part of a mixed Tuple takes in the flat action vector, in the Tuple's order:
    1 for a Discrete (its index, as a float), the flat size for a Box."""
    return [1 if isinstance(s, gym.spaces.Discrete) else int(np.prod(s.shape)) for s in space.spaces]


def num_discrete_actions(space: gym.Space) -> int:
    """The size an action mask must have: the choices of every categorical of the space
    (0: no discrete part, nothing to mask)."""
    if isinstance(space, gym.spaces.Box):
        return 0
    if is_mixed_tuple(space):
        return sum(int(s.n) for s in space.spaces if isinstance(s, gym.spaces.Discrete))
    return sum(discrete_sizes(space))


def _torch_dtype(dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(1, dtype=dtype)).dtype


def _box_like_spec(space: gym.Space, key: str) -> Spec:
    if isinstance(space, gym.spaces.Box):
        return tuple(space.shape), _torch_dtype(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return (), torch.int64
    if isinstance(space, gym.spaces.MultiBinary | gym.spaces.MultiDiscrete):
        return tuple(space.shape), torch.int64
    raise TypeError(f"observation {key!r}: unsupported space {space}")


def obs_specs(space: gym.Space) -> Dict[str, Spec]:
    if isinstance(space, gym.spaces.Dict):
        return {k: _box_like_spec(s, k) for k, s in space.spaces.items()}
    return {"obs": _box_like_spec(space, "obs")}


def obs_shapes(space: gym.Space) -> Dict[str, tuple]:
    """Model input shapes: scalar keys (Discrete) are fed as one feature."""
    return {k: shape or (1,) for k, (shape, _) in obs_specs(space).items()}


def action_spec(space: gym.Space) -> Spec:
    if isinstance(space, gym.spaces.Box):  # flat, as the Gaussian head produces it
        return (int(np.prod(space.shape)),), torch.float32
    if is_mixed_tuple(space):  # one float vector: each part in the Tuple's order (tuple_action_widths)
        return (sum(tuple_action_widths(space)),), torch.float32
    sizes = discrete_sizes(space)
    return ((), torch.int64) if isinstance(space, gym.spaces.Discrete) else ((len(sizes),), torch.int64)


def to_env_action(space: gym.Space, action: np.ndarray):
    """Turns one row of the action buffer into what env.step expects."""
    if isinstance(space, gym.spaces.Discrete):
        return int(action)
    if is_mixed_tuple(space):
        return _mixed_tuple_action(space, action)
    if isinstance(space, gym.spaces.Tuple):
        return tuple(int(a) for a in action)
    if isinstance(space, gym.spaces.Box):
        action = action.reshape(space.shape)
        return np.clip(action, space.low, space.high).astype(space.dtype, copy=False)
    return action


def _mixed_tuple_action(space: gym.spaces.Tuple, action: np.ndarray) -> tuple:
    """The flat float vector cut into the Tuple's parts (each Box part clipped to its bounds)."""
    parts, start = [], 0
    for part, width in zip(space.spaces, tuple_action_widths(space)):
        chunk = action[start:start + width]
        parts.append(int(chunk[0]) if isinstance(part, gym.spaces.Discrete) else to_env_action(part, chunk))
        start += width
    return tuple(parts)
