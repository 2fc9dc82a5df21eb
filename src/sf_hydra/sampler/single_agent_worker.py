"""The single-agent rollout worker: one trajectory slot per env and rollout, each env stepped
in a Python loop. Measured faster than stepping single-agent envs through the agent-rows
worker (benchmarks/sampler_throughput.py --variants off rows), so it stays a loop of its own;
both build the same records (sampler/rollout_worker.py); this one writes them into its own
`RolloutStaging`, copied into the rollout's slots once it is whole.
This module must not import lightning: it is loaded in every worker process.
"""

from __future__ import annotations

import pickle
import time
from typing import List, NamedTuple, Optional

import gymnasium as gym
import numpy as np
import torch

from sf_hydra.core.seal import key_path, seal, verify
from sf_hydra.core.seeding import env_seed
from sf_hydra.core.spaces import to_env_action
from sf_hydra.core.trajectory import RolloutStaging
from sf_hydra.envs import make_env, make_envs
from sf_hydra.envs.episode_info import SHAPING_UNITS, episode_stats, game_continues
from sf_hydra.sampler.env_groups import random_steps
from sf_hydra.sampler.episode_tracker import EpisodeTracker
from sf_hydra.sampler.messages import Trajectories
from sf_hydra.sampler.rollout_worker import BEAT_ENV, BEAT_STEP, BEAT_TIME, WorkerBase, close_all
from sf_hydra.sampler.settings import WorkerSettings

# What a worker snapshot's seal is bound to (core/seal.py): no other file's seal passes for one.
SNAPSHOT_SEAL = "sf_hydra serial rollout worker snapshot"


def seal_snapshot(snapshot: bytes) -> str:
    """This user's seal of a worker snapshot (core/seal.py), kept beside it in a checkpoint: a snapshot is a
    pickle, unpickled on resume only when its seal verifies. Raises OSError where the user's key can be
    neither read nor made: a snapshot that no resume could unpickle is not worth keeping."""
    mac = seal(SNAPSHOT_SEAL, snapshot)
    if mac is None:
        raise OSError(f"no seal key can be read or made at {key_path()} (set SF_HYDRA_HOME to a writable folder)")
    return mac


def snapshot_sealed(snapshot: bytes, mac: object) -> bool:
    """Whether `mac` is this user's seal of `snapshot` (`seal_snapshot`)."""
    return verify(SNAPSHOT_SEAL, snapshot, mac)


class EnvSteps(NamedTuple):
    """One env step of a split's envs, per env in row order (Python lists: appended per env)."""

    rewards: List[float]
    terminated: List[bool]
    truncated: List[bool]
    ends: List[tuple]  # (env index, whether its game goes on, its statistics) per episode that ended
    restarted: List[int]  # envs re-created this step (crashed or hung): their episode is dropped
    units: Optional[np.ndarray]  # [rows, 2V] the reward-shaping units the envs reported; None: no shaping


class SingleAgentWorker(WorkerBase):
    """Single-agent envs, one trajectory slot per env and rollout, stepped in a Python loop."""

    def __init__(self, worker_id: int, settings: WorkerSettings, *args, **kwargs):
        super().__init__(worker_id, settings, *args, **kwargs)
        n = settings.layout.num_envs_per_worker
        self.envs = make_envs(self.env_cfg, [env_seed(settings.seed, worker_id, i) for i in range(n)])
        fixed = settings.seats.env_policies  # every env's, worker by worker (algo.policy_assignment=fixed)
        fixed = None if fixed is None else list(fixed[worker_id * n:(worker_id + 1) * n])
        self._init_policy(self.envs[0].observation_space, self.envs[0].action_space, [1] * n, fixed)
        self.obs = self._obs_arrays(n)
        self.rnn = self._rnn_states(n)
        bounds = np.linspace(0, n, settings.layout.worker_num_splits + 1).astype(int)
        self.splits = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        self.games = EpisodeTracker(n)
        self.discrete_actions = isinstance(self.action_space, gym.spaces.Discrete)
        # A plain (not Dict) observation: one array, each env's row written in place after its step.
        self.plain_obs = None if isinstance(self.obs_space, gym.spaces.Dict) else self.obs["obs"]
        self.staging = RolloutStaging(self.buffers, n)
        env_arrays = [self.staging.arrays[name] for name in ("rewards", "dones", "time_outs")]
        self.env_arrays = None if any(a is None for a in env_arrays) else env_arrays
        for i, env in enumerate(self.envs):
            seed = env_seed(settings.seed, worker_id, i)
            self._store_obs(i, random_steps(env, self.decorrelation_steps(i), seed, env.reset(seed=seed)[0]),
                            starting=True)
        # An episode that random steps started is not reported: its return and length would be partial.
        self.dropping = {i for i in range(n) if self.decorrelation_steps(i) > 0}

    # -- small helpers ---------------------------------------------------------------------
    def _store_obs(self, i: int, obs, starting: bool = False) -> None:
        """Env i's observation into its row (`starting`: from its first reset or random start steps)."""
        key, value = "obs", obs
        try:
            if isinstance(obs, dict):
                for key, value in obs.items():
                    self.obs[key][i] = value
            else:
                self.obs["obs"][i] = obs
        except (ValueError, TypeError) as e:  # numpy's: it does not fit the declared space
            raise self._space_broken(key, [i], [value], starting) from e

    # -- the loop ----------------------------------------------------------------------------
    def _act_and_step(self, split: slice, t: int, episodes: list) -> None:
        obs, rnn_before, out, policies = self._act(split)
        self.staging.write(split, t, self._policy_record(obs, out, rnn_before, policies))
        t1 = time.perf_counter()
        step = self._step_envs(split, out.actions.numpy())
        self.timing["env_step"] += time.perf_counter() - t1
        rewards = np.array(step.rewards, np.float32)
        terminated, truncated = np.array(step.terminated, bool), np.array(step.truncated, bool)
        bonus = None if step.units is None else self._shaping_bonus(step.units, policies)
        if bonus is not None:
            rewards += bonus
        self._check_env_output(split, rewards)
        self.games.add(split, rewards, 1, bonus)
        for i in step.restarted:
            self.games.drop(i)
        for i, continues, stats in step.ends:
            self._episode_end(i, continues, episodes, stats)
        self._write_env_step(split, t, rewards, terminated, truncated)
        if out.rnn_states is not None:
            alive = torch.from_numpy(~(terminated | truncated)).unsqueeze(1)
            self.rnn[split] = out.rnn_states.float() * alive
        self._request(split)

    def _write_env_step(self, split: slice, t: int, rewards: np.ndarray, terminated: np.ndarray,
                        truncated: np.ndarray) -> None:
        """The env step's fields into the staging rows: `_env_record`'s values, written straight into
        the fields' numpy views (no tensor round trip, no torch dtype conversion), or through
        `_env_record` where a field's dtype has no numpy view."""
        if self.env_arrays is None:
            self.staging.write(split, t, self._env_record(rewards, terminated, truncated))
            return
        reward_rows, done_rows, time_out_rows = self.env_arrays
        reward_rows[split, t] = self._scaled_rewards(rewards)
        done_rows[split, t] = terminated | truncated
        time_out_rows[split, t] = truncated & ~terminated

    def _env_actions(self, actions: np.ndarray) -> list:
        """The rows' actions as env.step takes them: a Discrete space's as Python ints, made by one
        `tolist` (what `to_env_action` gives row by row: int(row))."""
        if self.discrete_actions:
            return actions.astype(np.int64, copy=False).reshape(len(actions)).tolist()
        return [to_env_action(self.action_space, a) for a in actions]

    def _step_envs(self, split: slice, actions: np.ndarray) -> "EnvSteps":
        """Steps the split's envs once each (an env whose episode ended is reset), leaving their next
        observations in `self.obs` (a plain observation's rows in one block write after the loop); the
        rewards and flags are Python lists, turned into arrays once by the caller (cheaper than a numpy
        item write per env). The heartbeat's time is set once per split, the env being stepped and its
        episode step (Python ints) before each env: a hung env is still named with its step."""
        rewards, terminated_flags, truncated_flags, ends, restarted = [], [], [], [], []
        units = None if self.shaping is None else np.zeros((split.stop - split.start, len(self.shaping[0])))
        beat, envs, plain = self.beat, self.envs, self.plain_obs
        steps = self.games.lengths[split].tolist()  # each env's episode step, for the heartbeat
        observations = []  # a plain observation's rows, written once after the loop
        watched = self._hang_timer  # else env calls go straight to the env (env_call would do just that)
        beat[BEAT_TIME] = time.time()
        for j, action in enumerate(self._env_actions(actions)):
            i = split.start + j
            beat[BEAT_ENV], beat[BEAT_STEP] = i, steps[j]
            try:
                env = envs[i]
                ob, reward, terminated, truncated, info = (
                    self.env_call(env.step, action) if watched else env.step(action))
                if units is not None and SHAPING_UNITS in info:
                    units[j] = info[SHAPING_UNITS]
                if terminated or truncated:
                    ends.append((i, game_continues(info), episode_stats(info)))
                    ob, _ = self.env_call(env.reset) if watched else env.reset()
            except Exception as error:
                ob = self._restart_env(i, error)
                reward, terminated, truncated = 0.0, False, True  # the episode ends, cut short
                ends = [end for end in ends if end[0] != i]
                restarted.append(i)
            rewards.append(reward)
            terminated_flags.append(terminated)
            truncated_flags.append(truncated)
            if plain is not None:
                observations.append(ob)
            else:
                self._store_obs(i, ob)
        if plain is not None:
            try:
                plain[split] = observations
            except (ValueError, TypeError) as e:  # numpy's: an observation does not fit the declared space
                raise self._space_broken("obs", range(split.start, split.stop), observations) from e
        return EnvSteps(rewards, terminated_flags, truncated_flags, ends, restarted, units)

    def _restart_env(self, i: int, error: Exception):
        """Re-creates env i after `error` (within hardware.max_env_restarts), returning its first
        observation; else re-raises the env's error, which stops the run."""
        if not self._may_restart(f"env {i} ({self.settings.envs.env_id!r})", error):
            raise error
        self._close_quietly(self.envs[i])
        self.envs[i] = make_env(self.env_cfg, seed=self._restart_seed(i))
        return self.env_call(self.envs[i].reset, seed=self._restart_seed(i))[0]

    def _bootstrap_values(self, split: slice) -> None:
        self.staging.write(split, self.rollout, {"values": self._act(split)[2].values})

    def collect(self) -> None:
        """One rollout for every env, then one message with the filled slots."""
        self._check_alive()
        if self.sync_mode:
            self._wait_for_learner_round()
        n = len(self.envs)
        t_wait, began_at = time.perf_counter(), time.time()
        slots = self._acquire_slots(n)
        episodes: list = []
        self.timing = {"inference": 0.0, "env_step": 0.0, "wait_for_slots": time.perf_counter() - t_wait}
        for t in range(self.rollout):
            self._maybe_sync_weights()
            for split in self.splits:
                self._act_and_step(split, t, episodes)
        for split in self.splits:
            self._bootstrap_values(split)
        self.staging.flush(slots)  # row i's rollout into slot i, before the message hands the slots over
        self.round += 1
        self.timing["bookkeeping"] = time.perf_counter() - t_wait - sum(self.timing.values())
        replaced, self.nonfinite_replaced = self.nonfinite_replaced, 0
        restarts, self.restarts_done = self.restarts_done, 0
        self.out_queue.put(Trajectories(self.id, slots.tolist(), episodes, n * self.rollout * self.frameskip,
                                        self.timing, nonfinite_replaced=replaced, env_restarts=restarts,
                                        began_at=began_at))

    # -- serial mode's resumable state ---------------------------------------------------------
    def snapshot(self) -> bytes:
        """Everything of this worker that a rollout changes and the run's weights do not hold: its envs (mid-
        episode, their generators included), their last observations and RNN states, the episodes in progress,
        the policy mapping (each env's policy, its generator), its rollout count; pickled, so kept in a
        checkpoint only with its seal (`seal_snapshot`). At a learner step's end in serial mode no rollout is
        half done, so this and the learner's checkpoint are the whole run (Sampler.serial_state). A running
        ViZDoom game pickles as its episode's seed and actions, replayed and checked when unpickled
        (envs/doom/env.py DoomEnv); raises (pickle's error) for an env that cannot be pickled."""
        return pickle.dumps({"envs": self.envs, "obs": self.obs, "rnn": self.rnn, "games": self.games,
                             "dropping": self.dropping, "mapping": self.mapping.state(),
                             "round": self.round})

    def restore(self, snapshot: bytes, mac: object) -> None:
        """Puts back what `snapshot` took (the envs built at start-up are closed and replaced), if `mac` is
        this user's seal of it; raises ValueError, having unpickled nothing, otherwise (Sampler checks every
        worker's seal before it restores any)."""
        if not verify(SNAPSHOT_SEAL, snapshot, mac):
            raise ValueError(f"a rollout worker snapshot without this user's seal ({key_path()}) is never unpickled")
        state = pickle.loads(snapshot)  # sealed: verified above
        close_all(self.envs)
        self.envs, self.games, self.dropping = state["envs"], state["games"], state["dropping"]
        self.round = state["round"]
        for key, value in state["obs"].items():
            self.obs[key][...] = value
        if self.rnn is not None and state["rnn"] is not None:
            self.rnn.copy_(state["rnn"])
        self.mapping.restore(state["mapping"])

    def close(self) -> None:
        close_all(self.envs)
