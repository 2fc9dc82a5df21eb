"""A rollout worker: steps a vector of envs with its own copy of the policy and writes
trajectories into shared slots. This module holds the single-agent worker (one slot per
env and rollout, the fast common case); `agent_rows.py` holds the worker for multi-agent
envs and batched sampling, whose rows may skip transitions.

On a CPU-only machine with few cores, acting with a local policy copy (weights re-read from
shared memory when their version changes) saves an inter-process round trip per step and a
process. The envs are split into `worker_num_splits` groups that act and step in turn.
This module must not import lightning: it is loaded in every worker process.
"""

from __future__ import annotations

import os
import queue
import signal
import time
import traceback
from typing import Dict, List

import numpy as np
import torch

from sf_hydra.envs import make_env
from sf_hydra.envs.episode_info import game_continues
from sf_hydra.models import build_model
from sf_hydra.sampler.buffers import TrajectoryBuffers
from sf_hydra.sampler.episode_tracker import EpisodeTracker
from sf_hydra.sampler.policy_store import PolicyStore
from sf_hydra.spaces import obs_specs, to_env_action


class StopRequested(Exception):
    """The learner asked us to stop, or it is gone."""


def env_seed(cfg, worker_id: int, env_index: int):
    if cfg.seed is None:
        return None
    return int(cfg.seed) * 100_003 + worker_id * 1_009 + env_index


class WorkerBase:
    """What every rollout worker shares: its policy copy, its slots, the stop and sync
    signals, and the message it sends after a rollout."""

    def __init__(self, worker_id: int, cfg, buffers: TrajectoryBuffers, store: PolicyStore,
                 free_slots, out_queue, stop_flag: torch.Tensor, sync_round: torch.Tensor, parent_pid):
        """parent_pid: the learner's pid, watched so that we exit if it dies (None in serial mode)."""
        self.id, self.cfg = worker_id, cfg
        self.buffers, self.store = buffers, store
        self.free_slots, self.out_queue = free_slots, out_queue
        self.stop_flag, self.sync_round, self.parent_pid = stop_flag, sync_round, parent_pid
        self.rollout = cfg.algo.rollout
        self.reward_scale, self.reward_clip = cfg.env.reward_scale, cfg.env.reward_clip
        self.frameskip = cfg.env.frameskip
        self.owned: List[int] = []  # free slots handed to us by the learner
        self.round = 0
        self.timing: Dict[str, float] = {}  # seconds spent per part of the last rollout
        self.sync_mode = not cfg.algo.async_rl

    def _init_policy(self, obs_space, action_space) -> None:
        self.obs_space, self.action_space = obs_space, action_space
        self.model = build_model(self.cfg, obs_space, action_space)
        self.model.eval()
        # Acting in the learner's precision keeps behaviour log-probs comparable with its own.
        self.autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cfg.hardware.precision == "bf16-mixed")
        self.version = self.store.load_into(self.model)

    def _obs_arrays(self, rows: int) -> Dict[str, np.ndarray]:
        return {k: np.zeros((rows, *shape), dtype=torch.empty(0, dtype=dt).numpy().dtype)
                for k, (shape, dt) in obs_specs(self.obs_space).items()}

    def _scaled_rewards(self, rewards: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.clip(rewards * self.reward_scale, -self.reward_clip, self.reward_clip))

    def _act(self, rows):
        """The policy step for these rows (a slice or an index array) of `self.obs` and
        `self.rnn`; returns the inputs it used and its output."""
        obs = {k: torch.from_numpy(v[rows]) for k, v in self.obs.items()}
        rnn_before = self.rnn[rows]
        t0 = time.perf_counter()
        with self.autocast:
            out = self.model.act(obs, rnn_before if self.model.core is not None else None)
        self.timing["inference"] += time.perf_counter() - t0
        return obs, rnn_before, out

    def _check_alive(self) -> None:
        if bool(self.stop_flag[0]) or (self.parent_pid is not None and os.getppid() != self.parent_pid):
            raise StopRequested()

    def _acquire_slots(self, n: int) -> torch.Tensor:
        """Blocks until the learner has freed enough slots: this is the back-pressure."""
        while len(self.owned) < n:
            try:
                self.owned.extend(self.free_slots.get(timeout=0.5))
            except queue.Empty:
                self._check_alive()
        taken, self.owned = self.owned[:n], self.owned[n:]
        return torch.tensor(taken, dtype=torch.int64)

    def _maybe_sync_weights(self) -> None:
        if self.store.current_version() != self.version:
            self.version = self.store.load_into(self.model)

    def _wait_for_learner_round(self) -> None:
        """Synchronous PPO: the next rollout starts only once the learner trained on this one."""
        while int(self.sync_round[0]) < self.round:
            self._check_alive()
            time.sleep(0.0005)


class RolloutWorker(WorkerBase):
    """Single-agent envs, one trajectory slot per env and rollout, stepped in a Python loop."""

    def __init__(self, worker_id: int, cfg, *args, **kwargs):
        super().__init__(worker_id, cfg, *args, **kwargs)
        n = cfg.hardware.num_envs_per_worker
        self.envs = [make_env(cfg.env, seed=env_seed(cfg, worker_id, i)) for i in range(n)]
        self._init_policy(self.envs[0].observation_space, self.envs[0].action_space)
        self.obs = self._obs_arrays(n)
        self.rnn = torch.zeros(n, self.model.rnn_state_size)
        bounds = np.linspace(0, n, cfg.hardware.worker_num_splits + 1).astype(int)
        self.splits = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        self.games = EpisodeTracker(n)
        for i, env in enumerate(self.envs):
            self._store_obs(i, env.reset(seed=env_seed(cfg, worker_id, i))[0])

    # -- small helpers ---------------------------------------------------------------------
    def _store_obs(self, i: int, obs) -> None:
        if isinstance(obs, dict):
            for k, v in obs.items():
                self.obs[k][i] = v
        else:
            self.obs["obs"][i] = obs

    # -- the loop ----------------------------------------------------------------------------
    def _act_and_step(self, split: slice, slots: torch.Tensor, t: int, episodes: list) -> None:
        b = self.buffers
        obs, rnn_before, out = self._act(split)
        t1 = time.perf_counter()
        for k, v in obs.items():
            b.obs[k][slots, t] = v
        b.actions[slots, t] = out.actions
        b.log_probs[slots, t] = out.log_probs.float()
        b.values[slots, t] = out.values.float()
        b.policy_versions[slots, t] = self.version
        if self.model.core is not None:
            b.rnn_states[slots, t] = rnn_before

        actions = out.actions.numpy()
        count = split.stop - split.start
        rewards, dones, time_outs = np.zeros(count, np.float32), np.zeros(count, np.float32), np.zeros(count, np.float32)
        ends = []  # (env index, whether its game goes on)
        for j in range(count):
            i = split.start + j
            env = self.envs[i]
            ob, reward, terminated, truncated, info = env.step(to_env_action(self.action_space, actions[j]))
            rewards[j] = reward
            if terminated or truncated:
                dones[j], time_outs[j] = 1.0, float(truncated and not terminated)
                ends.append((i, game_continues(info)))
                ob, _ = env.reset()
            self._store_obs(i, ob)
        self.timing["env_step"] += time.perf_counter() - t1
        self.games.add(split, rewards, 1)
        for i, continues in ends:
            self.games.end(i, continues, episodes)
        b.rewards[slots, t] = self._scaled_rewards(rewards)
        done_t = torch.from_numpy(dones)
        b.dones[slots, t] = done_t
        b.time_outs[slots, t] = torch.from_numpy(time_outs)
        if out.rnn_states is not None:
            self.rnn[split] = out.rnn_states.float() * (1.0 - done_t).unsqueeze(1)

    def _bootstrap_values(self, split: slice, slots: torch.Tensor) -> None:
        self.buffers.values[slots, self.rollout] = self._act(split)[2].values.float()

    def collect(self) -> None:
        """One rollout for every env, then one message with the filled slots."""
        self._check_alive()
        if self.sync_mode:
            self._wait_for_learner_round()
        n = len(self.envs)
        t_wait = time.perf_counter()
        slots = self._acquire_slots(n)
        episodes: list = []
        self.timing = {"inference": 0.0, "env_step": 0.0, "wait_for_slots": time.perf_counter() - t_wait}
        for t in range(self.rollout):
            self._maybe_sync_weights()
            for split in self.splits:
                self._act_and_step(split, slots[split], t, episodes)
        for split in self.splits:
            self._bootstrap_values(split, slots[split])
        self.round += 1
        self.timing["bookkeeping"] = time.perf_counter() - t_wait - sum(self.timing.values())
        self.out_queue.put(("traj", self.id, slots.tolist(), episodes, n * self.rollout * self.frameskip, self.timing))

    def close(self) -> None:
        close_all(self.envs)


def close_all(envs) -> None:
    for env in envs:
        try:
            env.close()
        except Exception:  # closing is best effort: the process is exiting anyway
            pass


def worker_process_main(worker_cls, worker_id: int, cfg_container: Dict, buffers, store, free_slots, out_queue,
                        stop_flag, sync_round, parent_pid: int) -> None:
    """Entry point of a worker process (`worker_cls`: RolloutWorker or AgentRowsWorker).
    Ctrl+C is the learner's to handle: it stops us."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(cfg_container)
    torch.set_num_threads(cfg.hardware.torch_threads)
    os.nice(cfg.hardware.worker_nice)  # children (env processes) inherit it
    worker = None
    try:
        worker = worker_cls(worker_id, cfg, buffers, store, free_slots, out_queue, stop_flag, sync_round, parent_pid)
        out_queue.put(("ready", worker_id))
        while True:
            worker.collect()
    except StopRequested:
        pass
    except BaseException:
        out_queue.put(("error", worker_id, traceback.format_exc()))
    finally:
        if worker is not None:
            worker.close()
