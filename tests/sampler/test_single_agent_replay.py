"""The single-agent worker's trajectories against a from-definition replay: the recorded actions,
fed one by one to fresh envs built with the worker's env seeds (after the same decorrelation
steps), must give the recorded observations, scaled and clipped rewards, dones and time-outs
bit for bit, and the reported games must be the replay's. This pins down the worker's env loop
(lists turned into arrays once per split, observation rows written in place, env fields written
straight into the staging arrays) to the plain definition, for several splits, reward scaling and
clipping, and time-limit truncations."""

from __future__ import annotations

import numpy as np
import torch

from sf_hydra.core.seeding import env_seed
from sf_hydra.core.trajectory import obs_field_name
from sf_hydra.envs import make_env
from sf_hydra.sampler.env_groups import random_steps
from tests.conftest import make_cfg
from tests.sampler.collect import running_sampler

ROLLOUTS_PER_WORKER = 5


def sampled(cfg):
    """Per worker, its messages' (slots' batch, episodes) in order (serial mode)."""
    out = {}
    with running_sampler(cfg) as sampler:
        for _ in range(ROLLOUTS_PER_WORKER * cfg.hardware.num_workers):
            traj = sampler.poll()
            batch = {k: v.clone() for k, v in sampler.buffers.gather(torch.tensor(traj.slots)).items()}
            out.setdefault(traj.worker_id, []).append((batch, traj.episodes))
            sampler.free(traj.slots)
    return out


class ReplayedEnv:
    """One env of a worker rebuilt from its seed, decorrelated as the worker does."""

    def __init__(self, cfg, worker: int, index: int):
        seed = env_seed(cfg.seed, worker, index)
        self.env = make_env(cfg.env, seed=seed)
        self.obs = random_steps(self.env, cfg.algo.rollout * index, seed, self.env.reset(seed=seed)[0])
        self.dropping = index > 0  # a game that random steps started is not reported
        self.ret, self.length = 0.0, 0

    def step(self, action: int):
        """Returns (reward, terminated, truncated, finished game's (return, length) or None)."""
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.ret, self.length = self.ret + float(np.float32(reward)), self.length + 1
        game = None
        if terminated or truncated:
            game = None if self.dropping else (self.ret, self.length)
            self.dropping, self.ret, self.length = False, 0.0, 0
            obs, _ = self.env.reset()
        self.obs = obs
        return reward, terminated, truncated, game


def check_rollout(cfg, batch, envs, games) -> None:
    scale, clip = cfg.env.reward_scale, cfg.env.reward_clip
    for row, env in enumerate(envs):
        for t in range(cfg.algo.rollout):
            assert np.array_equal(batch[obs_field_name("obs")][row, t].numpy(), env.obs), (row, t)
            reward, terminated, truncated, game = env.step(int(batch["actions"][row, t]))
            expected = np.clip(np.float32(reward) * np.float32(scale), -clip, clip).astype(np.float32)
            assert batch["rewards"][row, t].item() == expected, (row, t)
            assert batch["dones"][row, t].item() == float(terminated or truncated), (row, t)
            assert batch["time_outs"][row, t].item() == float(truncated and not terminated), (row, t)
            if game is not None:
                games.append(game)


def test_trajectories_equal_a_replay_of_their_actions(tmp_path):
    cfg = make_cfg(tmp_path, "hardware.serial_mode=true", "hardware.num_envs_per_worker=6",
                   "hardware.worker_num_splits=2", "algo.rollout=16", "env.max_episode_steps=20",
                   "env.reward_scale=0.3", "env.reward_clip=0.2", "seed=11")
    got = sampled(cfg)
    assert set(got) == {0, 1}
    truncations = 0
    for worker, rollouts in got.items():
        envs = [ReplayedEnv(cfg, worker, i) for i in range(cfg.hardware.num_envs_per_worker)]
        replayed_games, reported = [], []
        for batch, episodes in rollouts:
            check_rollout(cfg, batch, envs, replayed_games)
            reported += [(e.ret, e.length) for e in episodes]
            truncations += int(batch["time_outs"].sum())
        # Within a rollout the worker reports games per step in env order, as the replay (row by row) does
        # not: compare as multisets. Returns are float64 sums of float32 rewards in both.
        assert sorted(reported) == sorted(replayed_games)
        assert reported, "no game ended: the replay checked no episode statistics"
    assert truncations > 0, "no time-limit truncation: time_outs were not exercised"
