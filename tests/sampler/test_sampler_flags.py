"""The sampler's hardware flags with real worker processes and envs: CPU affinity, single-thread
envs, decorrelation (of envs on one worker, and of workers in time), the env info cache, and the
env wrappers of the `env` node (episode_counter, pixel_format=HWC)."""

import os
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.app.train import check_config
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.seeding import env_seed
from sf_hydra.core.trajectory import obs_field_name
from sf_hydra.envs import episode_stats, make_env
from sf_hydra.models import model_recipe
from sf_hydra.plan import worker_settings
from sf_hydra.sampler.env_info import env_info, env_info_cache_file
from sf_hydra.sampler.rollout_worker import decorrelation_delay
from tests.conftest import make_cfg
from tests.helpers.probe_envs import hwc_frame, read_log
from tests.sampler.collect import collect, running_sampler

PROBE = ("env=gym/any", "env.id=tests.helpers.probe_envs:ProbeCartPole-v0")
HWC = ("env=gym/any", "env.id=tests.helpers.probe_envs:HwcImage-v0", "env.pixel_format=HWC")


def _probe_cfg(tmp_path, *overrides):
    return make_cfg(tmp_path, *PROBE, f"+env.kwargs.log_dir={tmp_path}", "hardware.num_envs_per_worker=2",
                    *overrides)


def _worker_resets(tmp_path):
    """The probe env's seeded resets in the worker processes (not the learner's probe env)."""
    return [e for e in read_log(tmp_path) if e["event"] == "reset" and e["pid"] != os.getpid()]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_workers_pinned_round_robin_and_envs_single_threaded(tmp_path):
    cfg = _probe_cfg(tmp_path, "hardware.set_workers_cpu_affinity=true",
                     "hardware.force_envs_single_thread=true")
    collect(cfg, min_slots=4)
    cores = sorted(os.sched_getaffinity(0))
    resets = _worker_resets(tmp_path)
    assert {(e["worker"], e["env_index"]) for e in resets} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    for e in resets:
        assert e["cores"] == [cores[e["worker"] % len(cores)]], e
        assert e["omp"] == "1" and all(n == 1 for n in e["pool_threads"]), e


@pytest.mark.slow
def test_without_affinity_workers_keep_every_core(tmp_path):
    cfg = _probe_cfg(tmp_path, "hardware.set_workers_cpu_affinity=false")
    collect(cfg, min_slots=4)
    resets = _worker_resets(tmp_path)
    assert resets and all(e["cores"] == sorted(os.sched_getaffinity(0)) for e in resets)


def _first_obs_per_env(cfg):
    """Worker 0's first rollout: each env's first observation (slot i of its first message is env i)."""
    with running_sampler(cfg) as sampler:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            traj = sampler.poll(0.5)
            if traj is not None and traj.worker_id == 0:
                first = sampler.buffers.gather(torch.tensor(traj.slots))[obs_field_name("obs")][:, 0]
                return first.numpy()
        raise AssertionError("no trajectory from worker 0")


def test_envs_on_one_worker_start_after_rollout_x_index_random_steps(tmp_path):
    cfg = make_cfg(tmp_path, "hardware.num_workers=1", "hardware.num_envs_per_worker=3", "algo.batch_size=48")
    assert cfg.hardware.decorrelate_envs_on_one_worker  # Sample Factory's default
    first = _first_obs_per_env(cfg)
    for i in range(3):
        env = gym.make("CartPole-v1")
        seed = env_seed(cfg.seed, 0, i)
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        for _ in range(cfg.algo.rollout * i):  # what the worker did before acting
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                obs, _ = env.reset()
        np.testing.assert_allclose(first[i], obs, rtol=1e-6)


@pytest.mark.slow
def test_workers_start_after_their_decorrelation_delay(tmp_path):
    cfg = make_cfg(tmp_path, "hardware.decorrelate_experience_max_seconds=4")
    settings = worker_settings(cfg, None, model_recipe(cfg), learner_bf16=False)
    delays = [decorrelation_delay(settings, w) for w in range(2)]
    assert all(0 <= d <= 4 for d in delays) and abs(delays[0] - delays[1]) > 0.5, delays  # seed 0 spreads them
    first = {}
    with running_sampler(cfg) as sampler:  # start() returns once every worker is ready, before its pause
        t0 = time.monotonic()
        while len(first) < 2:
            assert time.monotonic() - t0 < 30, first
            traj = sampler.poll(0.05)
            if traj is not None:
                first.setdefault(traj.worker_id, time.monotonic() - t0)
                sampler.free(traj.slots)
    # A worker's pause starts when it is ready, up to ~1 s before the slowest worker (start-up skew).
    slow, fast = (1, 0) if delays[1] > delays[0] else (0, 1)
    assert first[slow] >= delays[slow] - 1.0, (first, delays)
    assert first[slow] - first[fast] >= delays[slow] - delays[fast] - 1.0, (first, delays)


def test_env_info_cache_builds_no_env_on_a_second_start(tmp_path):
    cfg = _probe_cfg(tmp_path, "hardware.use_env_info_cache=true")
    built = lambda: sum(e["event"] == "built" for e in read_log(tmp_path))  # noqa: E731
    first = env_info(cfg)
    assert built() == 1 and env_info_cache_file(cfg).is_file()
    again = env_info(cfg)
    assert built() == 1, "the second start built an env"
    assert again == first
    other = _probe_cfg(tmp_path, "hardware.use_env_info_cache=true", "env.max_episode_steps=50")
    assert env_info_cache_file(other) != env_info_cache_file(cfg)  # another env node, another entry
    env_info(other)
    assert built() == 2
    env_info(_probe_cfg(tmp_path, "hardware.use_env_info_cache=false"))  # cache off: always built
    assert built() == 3


def test_episode_counter_numbers_each_envs_episodes(tmp_path):
    cfg = make_cfg(tmp_path, "env.episode_counter=true", "hardware.num_workers=1", "hardware.num_envs_per_worker=2",
                   "hardware.decorrelate_envs_on_one_worker=false", "env.max_episode_steps=10", "algo.batch_size=32")
    assert "episode_number" in episode_stats(cfg.env)  # pbt.target_objective may name it
    out = collect(cfg, min_slots=6)
    numbers = sorted(e.extra["episode_number"] for e in out.episodes)
    # 2 envs, each numbering its episodes 0, 1, 2, ...: every number appears twice
    assert len(numbers) >= 4 and numbers[:4] == [0.0, 0.0, 1.0, 1.0], numbers


def test_hwc_images_reach_the_learner_channels_first(tmp_path):
    cfg = make_cfg(tmp_path, *HWC, "hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.batch_size=32",
                   "model.use_rnn=false")
    env = make_env(cfg.env)
    assert env.observation_space.shape == (3, 84, 84)
    out = collect(cfg, min_slots=6)
    obs = out.batch[obs_field_name("obs")]
    assert obs.shape[2:] == (3, 84, 84)
    expected = torch.from_numpy(np.ascontiguousarray(hwc_frame().transpose(2, 0, 1)))
    assert torch.equal(obs[0, 0], expected)
    # Its episodes all last 20 steps; env 1 began 16 random steps into one (decorrelation): unreported.
    assert len(out.episodes) >= 3 and all(e.length == 20 for e in out.episodes), out.episodes


@pytest.mark.parametrize("overrides, key", [
    (("hardware.decorrelate_experience_max_seconds=-1",), "hardware.decorrelate_experience_max_seconds"),
    (("hardware.decorrelate_experience_max_seconds=300",), "hardware.decorrelate_experience_max_seconds"),
    (("logger.flush_summaries_interval=0",), "logger.flush_summaries_interval"),
    (("benchmark=true", "pbt.with_pbt=true", "algo.num_policies=2"), "pbt.with_pbt"),
    (("env.episode_counter=true", "hardware.batched_sampling=true"), "env.episode_counter"),
    (("env.pixel_format=HWC", "hardware.batched_sampling=true"), "env.pixel_format"),
    (("env=gym/multi_agent_toy", "env.episode_counter=true"), "env.episode_counter"),
    (("env=gym/multi_agent_toy", "algo.num_policies=2", "algo.policy_assignment=fixed"), "algo.policy_assignment"),
])
def test_bad_flag_values_are_refused_before_any_process(tmp_path, overrides, key):
    cfg = make_cfg(tmp_path, *overrides)
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
        from sf_hydra.sampler.sampler import check_sampling_options

        check_sampling_options(cfg, env_info(cfg).num_agents)
    assert err.value.key == key
