"""WorkerSettings, grouped by what reads it (envs, layout, process, acting, seats): every group is a frozen
dataclass of plain values that pickles as it is (it reaches the worker processes and inference servers so),
and each hardware/env/self-play key lands in the group its reader takes."""

import dataclasses
import pickle

import pytest

from sf_hydra.models.recipe import ModelRecipe, model_recipe
from sf_hydra.plan import worker_settings
from tests.conftest import make_cfg


def settings_of(cfg, num_agents=None):
    return worker_settings(cfg, num_agents, model_recipe(cfg), learner_bf16=False)

PLAIN = (bool, int, float, str, type(None), dict, list, tuple, ModelRecipe)


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return isinstance(value, PLAIN)


def test_the_groups_hold_plain_values_and_pickle(tmp_path):
    settings = settings_of(make_cfg(tmp_path, "algo.num_policies=2"))
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
    s = settings_of(make_cfg(
        tmp_path, "env.reward_scale=0.5", "env.frameskip=3", "hardware.max_env_restarts=2",
        "hardware.decorrelate_envs_on_one_worker=true", "hardware.num_envs_per_worker=4",
        "hardware.worker_num_splits=1", "hardware.batched_sampling=true", "hardware.torch_threads=2",
        "hardware.worker_nice=5", "hardware.decorrelate_experience_max_seconds=3", "hardware.precision=bf16-mixed",
        "selfplay.latest_prob=0.25", "seed=7"))
    assert (s.envs.reward_scale, s.envs.frameskip, s.envs.max_env_restarts) == (0.5, 3, 2)
    assert s.envs.decorrelate_envs_on_one_worker and s.envs.env["frameskip"] == 3
    assert (s.layout.num_envs_per_worker, s.layout.worker_num_splits, s.layout.batched_sampling) == (4, 1, True)
    assert (s.process.torch_threads, s.process.worker_nice, s.process.decorrelate_experience_max_seconds) == (2, 5, 3)
    assert s.acting.bf16 and s.seats.latest_prob == 0.25 and s.seed == 7
    fixed = settings_of(make_cfg(tmp_path, "algo.num_policies=2", "hardware.num_workers=2",
                                 "hardware.num_envs_per_worker=2", "algo.policy_assignment=fixed"))
    assert fixed.seats.env_policies == (0, 0, 1, 1)


def _names(settings) -> set:
    """The field names of a settings dataclass and of the groups it holds."""
    names = set()
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        names |= _names(value) if dataclasses.is_dataclass(value) and not isinstance(value, ModelRecipe) else {f.name}
    return names


def test_the_sampler_and_the_batches_hold_no_copy_of_the_workers_values(tmp_path):
    from sf_hydra.plan import batch_settings, sampler_settings

    cfg = make_cfg(tmp_path, "hardware.max_env_restarts=1", "hardware.restart_hung_envs=true")
    sampler = sampler_settings(cfg, None, model_recipe(cfg), learner_bf16=False)
    workers = _names(sampler.workers)
    held = {f.name for f in dataclasses.fields(sampler) if f.name != "workers"}
    copies = ("rollout", "num_policies", "pool_size", "inference_device", "num_envs_per_worker", "env_id",
              "stall_timeout_sec", "restart_hung_envs", "sync", "frameskip")
    assert not any(copy in name for name in held | _names(batch_settings(cfg)) for copy in copies), held
    assert set(copies) <= workers
    assert sampler.stall_limit == 1.5 * sampler.workers.stall_timeout_sec  # a worker restarts hung envs itself
