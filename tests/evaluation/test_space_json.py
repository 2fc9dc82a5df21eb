"""Spaces as JSON (a run folder's spaces.json, what Policy.load reads): every kind sf_hydra trains on comes back
equal, bounds and dtypes included."""

import json

import gymnasium as gym
import numpy as np
import pytest

from sf_hydra.core.spaces import space_from_json, space_to_json

SPACES = [
    gym.spaces.Box(0, 255, (3, 72, 128), np.uint8),  # an image: one number for each bound
    gym.spaces.Box(-np.inf, np.inf, (17,), np.float64),  # MuJoCo: infinite bounds
    gym.spaces.Box(np.array([-1.0, -2.5], np.float32), np.array([1.0, np.inf], np.float32)),  # bounds per entry
    gym.spaces.Discrete(7),
    gym.spaces.Discrete(3, start=-1),
    gym.spaces.MultiDiscrete([3, 4]),
    gym.spaces.MultiBinary(5),
    gym.spaces.Dict({"obs": gym.spaces.Box(0, 1, (4,)), "action_mask": gym.spaces.Box(0, 1, (5,), np.int8)}),
    gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,))]),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: str(s)[:40])
def test_a_space_comes_back_equal_through_json(space):
    back = space_from_json(json.loads(json.dumps(space_to_json(space))))
    assert back == space
    if isinstance(space, gym.spaces.Box):
        assert back.dtype == space.dtype
        assert np.array_equal(back.low, space.low) and np.array_equal(back.high, space.high)


def test_a_space_it_cannot_describe_is_named():
    with pytest.raises(TypeError, match="Text"):
        space_to_json(gym.spaces.Text(5))
