"""WorkerSettings, grouped by what reads it (envs, layout, process, acting, seats): every group is a frozen
dataclass of plain values that pickles as it is (it reaches the worker processes and inference servers so),
and each hardware/env/self-play key lands in the group its reader takes."""

import dataclasses
import pickle

import pytest

from sf_hydra.models.recipe import ModelRecipe
from sf_hydra.plan import worker_settings
from tests.conftest import make_cfg

PLAIN = (bool, int, float, str, type(None), dict, list, tuple, ModelRecipe)


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return isinstance(value, PLAIN)


def test_the_groups_hold_plain_values_and_pickle(tmp_path):
    settings = worker_settings(make_cfg(tmp_path, "algo.num_policies=2"), None)
    groups = [getattr(settings, f.name) for f in dataclasses.fields(settings) if dataclasses.is_dataclass(
        getattr(settings, f.name))]
    assert [type(g).__name__ for g in groups] == ["EnvSettings", "EnvLayout", "ProcessSettings", "ActingSettings",
                                                  "SeatSettings"]
    for group in groups:
        assert type(group).__dataclass_params__.frozen
        assert all(_plain(getattr(group, f.name)) for f in dataclasses.fields(group)), group
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(group, dataclasses.fields(group)[0].name, None)
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_each_key_reaches_its_group(tmp_path):
    s = worker_settings(make_cfg(
        tmp_path, "env.reward_scale=0.5", "env.frameskip=3", "hardware.max_env_restarts=2",
        "hardware.decorrelate_envs_on_one_worker=true", "hardware.num_envs_per_worker=4",
        "hardware.worker_num_splits=1", "hardware.batched_sampling=true", "hardware.torch_threads=2",
        "hardware.worker_nice=5", "hardware.decorrelate_experience_max_seconds=3", "hardware.precision=bf16-mixed",
        "selfplay.latest_prob=0.25", "seed=7"), None)
    assert (s.envs.reward_scale, s.envs.frameskip, s.envs.max_env_restarts) == (0.5, 3, 2)
    assert s.envs.decorrelate_envs_on_one_worker and s.envs.env["frameskip"] == 3
    assert (s.layout.num_envs_per_worker, s.layout.worker_num_splits, s.layout.batched_sampling) == (4, 1, True)
    assert (s.process.torch_threads, s.process.worker_nice, s.process.decorrelate_experience_max_seconds) == (2, 5, 3)
    assert s.acting.bf16 and s.seats.latest_prob == 0.25 and s.seed == 7
    fixed = worker_settings(make_cfg(tmp_path, "algo.num_policies=2", "hardware.num_workers=2",
                                     "hardware.num_envs_per_worker=2", "algo.policy_assignment=fixed"), None)
    assert fixed.seats.env_policies == (0, 0, 1, 1)
