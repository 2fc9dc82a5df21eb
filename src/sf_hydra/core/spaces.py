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


def space_to_json(space: gym.Space) -> dict:
    """A gymnasium space as plain JSON (a run folder's `spaces.json`, an exported policy's description):
    Box, Discrete, MultiDiscrete, MultiBinary, and Dict and Tuple of them. `space_from_json` reads it back equal."""
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": _bounds(space.low), "high": _bounds(space.high)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": np.asarray(space.nvec).tolist(), "dtype": str(space.dtype)}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    raise TypeError(f"a space sf_hydra can describe (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple), "
                    f"not {type(space).__name__}")


def _bounds(values: np.ndarray):
    """A Box's bounds: one number when every entry is the same (an image's 0..255), else the nested list;
    infinities as the strings JSON allows."""
    flat = np.unique(values)
    if flat.size == 1:
        return _number(flat[0])
    return np.vectorize(_number, otypes=[object])(values).tolist()


def _number(x):
    x = float(x)
    return "inf" if x == np.inf else "-inf" if x == -np.inf else (int(x) if x.is_integer() else x)


def space_from_json(d: dict) -> gym.Space:
    """The space `space_to_json` described."""
    kind = d["type"]
    if kind == "Box":
        dtype = np.dtype(d["dtype"])
        low, high = (np.asarray(d[k], dtype=np.float64) if not isinstance(d[k], (int, float, str))
                     else float(d[k]) for k in ("low", "high"))
        shape = tuple(d["shape"])
        return gym.spaces.Box(low=np.broadcast_to(low, shape).astype(dtype),
                              high=np.broadcast_to(high, shape).astype(dtype), shape=shape, dtype=dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d.get("start", 0))
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(d["nvec"], dtype=d.get("dtype", "int64"))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(d["n"])
    if kind == "Dict":
        return gym.spaces.Dict({k: space_from_json(s) for k, s in d["spaces"].items()})
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_json(s) for s in d["spaces"]])
    raise ValueError(f"unknown space type {kind!r} in a space description")
