"""What every rollout worker shares (`WorkerBase`) and the worker process's entry point. A
worker steps its envs with its own copy of the policy and writes trajectories into shared
slots. Two loops: `single_agent_worker.py` (one slot per env and rollout, the fast common
case) and `agent_rows_worker.py` (multi-agent envs and batched sampling: rows that may skip
transitions).

On a CPU-only machine with few cores, acting with a local policy copy (weights re-read from
shared memory when their version changes) saves an inter-process round trip per step and a
process. The envs are split into `worker_num_splits` groups that act and step in turn.
This module must not import lightning: it is loaded in every worker process.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import time
import traceback
from typing import Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np
import torch
from omegaconf import OmegaConf
from threadpoolctl import threadpool_limits

from sf_hydra.core.faults import Fault
from sf_hydra.core.seeding import ROLLOUT_WORKER, env_seed, seed_process
from sf_hydra.core.spaces import obs_specs
from sf_hydra.core.trajectory import TrajectoryBuffers, obs_field_name
from sf_hydra.models.actor_critic import acting_copy, build_model, policies_act
from sf_hydra.sampler import mp
from sf_hydra.sampler.episode_tracker import EpisodeTracker
from sf_hydra.sampler.inference_server import InferenceClient
from sf_hydra.sampler.messages import WorkerFailed, WorkerReady
from sf_hydra.sampler.policy_mapping import PolicyMapping
from sf_hydra.sampler.policy_store import PolicyStore
from sf_hydra.sampler.settings import WorkerSettings

log = logging.getLogger(__name__)


class StopRequested(Exception):
    """The learner asked us to stop, or it is gone."""


class NonFiniteEnvOutput(RuntimeError):
    """An env returned a NaN or infinite reward or observation (env.nonfinite=error)."""


class EnvBrokeItsSpace(Fault):
    """An env returned an observation its declared observation space does not hold (another shape, or values
    that do not convert to the space's dtype), found where the observation is written into the buffers."""


class EnvHung(Exception):
    """An env step or reset did not return within hardware.worker_stall_timeout_sec."""


# Heartbeat columns (one row per worker in a shared float64 tensor, read by the sampler):
BEAT_TIME, BEAT_ENV, BEAT_STEP = 0, 1, 2  # time.time() of the last progress; the env being stepped (-1:
# none, the worker waits for slots or the learner; -2: it waits for its inference server) and that env's step
BEAT_WAITING_FOR_SERVER = -2


class WorkerPool:
    """The opponent pool as a worker sees it (policy_mapping.PoolView): its slots' stores after
    the `num_policies` trained ones, and the versions the worker follows (a slot's version is its
    snapshot's generation, 0 while empty). `versions` is the worker's own array, updated in place."""

    def __init__(self, stores: List[PolicyStore], versions: np.ndarray, num_policies: int):
        self.slots, self.versions, self.n = stores[num_policies:], versions, num_policies
        self.slot_odds = [store.odds.numpy() for store in self.slots]

    def filled(self) -> List[int]:
        return [j for j, v in enumerate(self.versions[self.n:]) if v > 0]

    def generation(self, slot: int) -> int:
        return int(self.versions[self.n + slot])

    def odds(self, policy: int) -> np.ndarray:
        return np.array([odds[policy] for odds in self.slot_odds], dtype=np.float64)


class WorkerBase:
    """What every rollout worker shares: its policy copy, its slots, the stop and sync
    signals, and the message it sends after a rollout."""

    def __init__(self, worker_id: int, settings: WorkerSettings, buffers: TrajectoryBuffers, stores: List[PolicyStore],
                 free_slots, out_queue, stop_flag: torch.Tensor, sync_round: torch.Tensor, heartbeats: torch.Tensor,
                 parent_pid, channel=None):
        """stores: the trained policies' weights, then the opponent pool's snapshots (policy ids
        in that order). parent_pid: the learner's pid, watched so that we exit if it dies (None
        in serial mode). channel: this worker's InferenceChannel with hardware.inference=server
        (its observations and RNN states then live there), else None."""
        self.id, self.settings = worker_id, settings
        self.env_cfg = OmegaConf.create(settings.envs.env)  # what the env family's factory reads
        self.channel, self.client, self.acted_versions = channel, None, None
        self.buffers, self.stores = buffers, stores
        # Each policy's reward-shaping difference (PolicyStore.reward_shaping); None: no shaping to adjust.
        self.shaping = [s.reward_shaping.numpy() for s in stores] if stores[0].reward_shaping.numel() else None
        self.records_rnn = "rnn_states" in buffers.spec
        self.records_policy_ids = "policy_ids" in buffers.spec
        self.obs_fields: Dict[str, str] = {}  # observation key -> its field name, filled at the first step
        self.free_slots, self.out_queue = free_slots, out_queue
        self.stop_flag, self.sync_round, self.parent_pid = stop_flag, sync_round, parent_pid
        self.parent_watch = mp.ParentWatch(parent_pid) if parent_pid is not None else None
        self.rollout = settings.rollout
        self.reward_scale, self.reward_clip = settings.envs.reward_scale, settings.envs.reward_clip
        self.frameskip = settings.envs.frameskip
        self.num_policies = settings.num_policies
        self.owned: List[int] = []  # free slots handed to us by the learner
        self.round = 0
        self.timing: Dict[str, float] = {}  # seconds spent per part of the last rollout
        self.sync_mode = settings.sync
        self.finished_games: list = []  # games of two or more players ended since the last message (games.Game)
        self.beat = heartbeats.numpy()[worker_id]
        self.beat[:] = (time.time(), -1, 0)
        self.restarts: List[float] = []  # times of this worker's env restarts (hardware.max_env_restarts per hour)
        self.restarts_done = 0  # since the last message
        self._in_env_call = False  # an env's step/reset runs: a hang timer may interrupt it
        self._hang_timer = (settings.envs.max_env_restarts > 0 and settings.envs.restart_hung_envs
                            and parent_pid is not None)
        if self._hang_timer:  # a worker process: SIGALRM is ours (serial mode: the learner's process, no timer)
            signal.signal(signal.SIGALRM, self._on_alarm)
        self.replace_nonfinite = settings.envs.replace_nonfinite
        # Set by each subclass once it built its envs (rows): every row's game in progress, and the rows
        # whose game is not reported (cut short by an env restart, or started by decorrelation's random steps).
        self.games: Optional[EpisodeTracker] = None
        self.dropping: set = set()
        self.nonfinite_replaced = 0  # non-finite env values replaced by 0 since the last message

    def _init_policy(self, obs_space, action_space, group_sizes, fixed: Optional[List[int]] = None) -> None:
        """A model per store (trained policies, then snapshots) and the rows' policy mapping (`fixed`: each
        row's policy for the whole run; None: drawn per episode)."""
        self.obs_space, self.action_space = obs_space, action_space
        self.models = [acting_copy(build_model(self.settings.acting.model, obs_space, action_space),
                                   self.settings.acting.bf16) for _ in self.stores]
        self.model = self.models[0]
        # Rows of several policies: one fused forward where the models allow it (their weights then live in
        # stacked tensors that load_into fills in place).
        self.policies_act = policies_act(self.models)
        # Acting in the learner's precision keeps behaviour log-probs comparable with its own (acting_copy).
        self.autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.settings.acting.bf16)
        if self.channel is None:
            self.versions = np.array([store.load_into(m) for store, m in zip(self.stores, self.models)], np.int64)
        else:  # the server acts: the worker follows the versions only (the opponent pool's filled slots)
            self.versions = np.array([store.current_version() for store in self.stores], dtype=np.int64)
            self.client = InferenceClient(self.channel, self.model.core is not None, self._check_alive,
                                          self.settings.stall_timeout_sec)
        self.version = int(self.versions[0])
        s = self.settings
        seed = None if s.seed is None else [s.seed, self.id, 31_337]
        self.mapping = PolicyMapping(group_sizes, self.num_policies, s.seats.mix_policies_in_one_env,
                                     s.seats.pool_size, s.seats.latest_prob, np.random.default_rng(seed),
                                     fixed)
        self.mapping.start(WorkerPool(self.stores, self.versions, self.num_policies))
        self.single_policy = self.mapping.trivial
        # The policies whose weights this worker follows: with fixed rows only theirs (a worker of one policy does
        # not copy the others' weights at each of their versions).
        self.followed = sorted(set(fixed)) if fixed is not None else list(range(len(self.stores)))
        # The one policy every row acts for, for the whole run (fixed rows of one policy): acting, recording and
        # reward shaping then take that index, with no per-row lookup (None: rows of several policies, or one
        # policy, `single_policy`).
        self.only_policy = self.followed[0] if fixed is not None and len(self.followed) == 1 else None

    def decorrelation_steps(self, env_index: int) -> int:
        """hardware.decorrelate_envs_on_one_worker: random actions env `env_index` of this worker
        takes after its first reset (rollout x its index, as Sample Factory does), so that the
        envs of a worker do not end their episodes in the same rollout. Those steps are neither
        recorded nor counted."""
        return self.rollout * env_index if self.settings.envs.decorrelate_envs_on_one_worker else 0

    def _rnn_states(self, rows: int) -> torch.Tensor:
        """The rows' RNN states (in the inference channel with a server), zero at the start."""
        return self.channel.rnn if self.channel is not None else torch.zeros(rows, self.model.rnn_state_size)

    def snapshot(self) -> bytes:
        """Serial mode's resumable state of this worker (SingleAgentWorker has it)."""
        raise NotImplementedError(f"{type(self).__name__} (multi-agent envs, hardware.batched_sampling) does not save "
                                  "its envs in checkpoints: a resumed run starts them anew")

    def restore(self, snapshot: bytes, mac: object) -> None:
        raise NotImplementedError(type(self).__name__)

    def _obs_arrays(self, rows: int) -> Dict[str, np.ndarray]:
        """The rows' current observations (in the inference channel's shared memory with a server)."""
        if self.channel is not None:
            arrays = {k: t.numpy() for k, t in self.channel.obs.items()}
        else:
            arrays = {k: np.zeros((rows, *shape), dtype=torch.empty(0, dtype=dt).numpy().dtype)
                      for k, (shape, dt) in obs_specs(self.obs_space).items()}
        self.float_obs_keys = [k for k, a in arrays.items() if np.issubdtype(a.dtype, np.floating)]
        return arrays

    def _check_env_output(self, rows: slice, rewards: np.ndarray) -> None:
        """Rewards and (floating-point) observations of these rows' last env step must be finite:
        else stop with the env, the field and the step (env.nonfinite=error), or replace them by
        0 and count them (replace). Integer observations (pixels) cannot be non-finite."""
        if np.isfinite(rewards).all() and all(np.isfinite(self.obs[k][rows]).all() for k in self.float_obs_keys):
            return  # the common case: two checks, no arrays kept
        bad = {"reward": ~np.isfinite(rewards)}
        for k in self.float_obs_keys:
            bad[f"observation {k!r}"] = ~np.isfinite(self.obs[k][rows]).reshape(len(rewards), -1).all(1)
        if not any(b.any() for b in bad.values()):
            return
        if self.replace_nonfinite:
            self.nonfinite_replaced += int((~np.isfinite(rewards)).sum())
            np.nan_to_num(rewards, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
            for k in self.float_obs_keys:
                part = self.obs[k][rows]
                self.nonfinite_replaced += int((~np.isfinite(part)).sum())
                self.obs[k][rows] = np.nan_to_num(part, nan=0.0, posinf=0.0, neginf=0.0)
            return
        field, flags = next((f, b) for f, b in bad.items() if b.any())
        row = rows.start + int(np.flatnonzero(flags)[0])
        value = rewards[row - rows.start] if field == "reward" else "NaN or inf"
        raise NonFiniteEnvOutput(
            f"env {self.settings.envs.env_id!r} (rollout worker {self.id}, {self._row_name(row)}) returned a "
            f"non-finite {field} ({value}) at step {int(self.games.lengths[row]) + 1} of its episode; "
            "env.nonfinite=replace turns such values into 0 and counts them")

    def _space_broken(self, key: str, rows: Sequence[int], values: Sequence, starting: bool = False) -> Fault:
        """What to raise once writing these rows' observations (`values`: each row's, the observation's `key`
        part) into the buffer failed (numpy's ValueError or TypeError): the first row whose observation does
        not fit, named with the env id, the row's env, the step (`starting`: the env's first reset or its
        random start steps), the declared space and the shape and dtype the env returned. Only a failed write
        calls it: a step that fits costs nothing more."""
        buffer = self.obs[key]
        row, value = next(((r, v) for r, v in zip(rows, values) if not _fits(v, buffer.shape[1:], buffer.dtype)),
                          (rows[0], values[0]))
        space = self.obs_space[key] if isinstance(self.obs_space, gym.spaces.Dict) else self.obs_space
        when = ("at its first reset or one of its random start steps (hardware.decorrelate_envs_on_one_worker)"
                if starting else f"at step {int(self.games.lengths[row]) + 1} of its episode")
        part = "" if key == "obs" else f" (its {key!r} part)"
        return EnvBrokeItsSpace(
            f"env {self.settings.envs.env_id!r} (rollout worker {self.id}, {self._row_name(row)}) returned an "
            f"observation{part} {_shape_and_dtype(value)} {when}; its declared observation space is "
            f"{type(space).__name__} of shape {tuple(space.shape)}, dtype {space.dtype}: an env's observations must "
            "keep the shape of its observation_space")

    def _row_name(self, row: int) -> str:
        group, seat = int(self.mapping.row_group[row]), int(self.mapping.row_seat[row])
        return f"env {group}" if self.mapping.sizes[group] == 1 else f"env {group}, agent {seat}"

    def _policy_record(self, obs: Dict[str, torch.Tensor], out, rnn_before: torch.Tensor, policies) -> dict:
        """The fields one policy step fills: its inputs, its outputs, the acting policy and its
        version (`policies`: each row's policy id, one id for every row, or None when there is one policy)."""
        if len(self.obs_fields) != len(obs):
            self.obs_fields = {k: obs_field_name(k) for k in obs}
        record = {self.obs_fields[k]: v for k, v in obs.items()}
        if self.acted_versions is not None:  # the server's: each row's acting version
            versions = self.acted_versions
        elif policies is None:
            versions = self.version
        elif isinstance(policies, int):
            versions = int(self.versions[policies])
        else:
            versions = torch.from_numpy(self.versions[policies])
        record.update(actions=out.actions, log_probs=out.log_probs, values=out.values, policy_versions=versions)
        if self.records_policy_ids:
            record["policy_ids"] = policies if isinstance(policies, int) else torch.from_numpy(policies)
        if self.records_rnn:
            record["rnn_states"] = rnn_before
        if out.extras:
            record.update(out.extras)
        return record

    def _env_record(self, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> dict:
        """The fields one env step fills; rewards scaled and clipped for the learner."""
        return {"rewards": torch.from_numpy(self._scaled_rewards(rewards)),
                "dones": torch.from_numpy(terminated | truncated),
                "time_outs": torch.from_numpy(truncated & ~terminated)}

    def _scaled_rewards(self, rewards: np.ndarray) -> np.ndarray:
        """rewards x env.reward_scale, clipped to +-env.reward_clip: np.clip's values (clip is max
        then min), in place in the product, without np.clip's Python layers (about 2 us a call)."""
        scaled = rewards * self.reward_scale
        np.maximum(scaled, -self.reward_clip, out=scaled)
        return np.minimum(scaled, self.reward_clip, out=scaled)

    def _act(self, rows):
        """The policy step for these rows (a slice or an index array) of `self.obs` and
        `self.rnn`; returns the inputs it used, its output and each row's policy id (one id
        when every row acts for the same policy for the whole run; None when there is one
        policy). With an inference server, the server's answer (see `_request`)."""
        obs = {k: torch.from_numpy(v[rows]) for k, v in self.obs.items()}
        rnn_before = self.rnn[rows]
        t0 = time.perf_counter()
        if self.single_policy:
            policies = None
        elif self.only_policy is not None and self.client is None:
            policies = self.only_policy
        else:
            policies = self.mapping.policy[rows]
        if self.client is not None:  # hardware.inference=server: the answer to this split's request
            self._beat(BEAT_WAITING_FOR_SERVER)
            out, self.acted_versions, policies = self.client.act(rows, policies)
            self.timing["inference"] += time.perf_counter() - t0
            return obs, rnn_before, out, policies
        with self.autocast:
            rnn = rnn_before if self.model.core is not None else None
            out = self.policies_act(obs, rnn, policies)
        self.timing["inference"] += time.perf_counter() - t0
        return obs, rnn_before, out, policies

    def _request(self, rows: slice) -> None:
        """hardware.inference=server: these rows stepped and their observations and RNN states are in
        place, so their next policy step is asked for now; the worker steps its other splits meanwhile."""
        if self.client is not None:
            self.client.submit(rows, None if self.single_policy else self.mapping.policy[rows])

    def _shaping_bonus(self, units: np.ndarray, policies) -> Optional[np.ndarray]:
        """[R] what the rows' policies' own reward-shaping weights add to the env's rewards,
        given the units each row's env reported ([R, 2V]); None when no policy has its own."""
        table = np.stack(self.shaping)
        if not table.any():
            return None
        weights = table[0][None] if policies is None else table[policies]
        return (units * weights).sum(1).astype(np.float32)

    def _episode_end(self, row: int, game_continues: bool, episodes: list, stats=None) -> None:
        """A done of `row`: its game is reported and, at a game's end, its next policy drawn
        (a game cut short by re-creating its env, or started by decorrelation's random steps, is
        dropped unreported, up to its end: a done whose game goes on keeps dropping)."""
        if row in self.dropping:
            if not game_continues:
                self.dropping.discard(row)
            self.games.drop(row)
            return
        policy = 0 if self.single_policy else int(self.mapping.policy[row])
        episode = self.games.end(row, game_continues, episodes, policy, stats)
        if episode is not None and not self.single_policy:
            self.mapping.episode_end(row, episode.ret, self.finished_games)

    # -- watched env calls --------------------------------------------------------------------
    def _beat(self, env_index: int, episode_step: int = 0) -> None:
        self.beat[BEAT_TIME], self.beat[BEAT_ENV], self.beat[BEAT_STEP] = time.time(), env_index, episode_step

    def _on_alarm(self, signum, frame) -> None:
        if self._in_env_call:
            raise EnvHung()
        signal.setitimer(signal.ITIMER_REAL, 0.05)  # in our own code: interrupt the env call that follows

    def env_call(self, call, *args, **kwargs):
        """`call(*args)` (an env's step or reset), interrupted by EnvHung when it takes longer than
        hardware.worker_stall_timeout_sec (worker processes with env restarts on). Envs blocked in
        C code that ignores signals are caught by the sampler's watch instead."""
        if not self._hang_timer:
            return call(*args, **kwargs)
        self._in_env_call = True
        signal.setitimer(signal.ITIMER_REAL, self.settings.stall_timeout_sec)
        try:
            return call(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._in_env_call = False

    def _may_restart(self, what: str, error: BaseException) -> bool:
        """Whether the worker may re-create an env that `error` broke (hardware.max_env_restarts
        per hour); logs the restart. False: the error stops the run."""
        now = time.time()
        self.restarts = [t for t in self.restarts if now - t < 3600.0]
        limit = self.settings.envs.max_env_restarts
        if len(self.restarts) >= limit:
            return False
        self.restarts.append(now)
        self.restarts_done += 1
        cause = "hung (no return in hardware.worker_stall_timeout_sec)" if isinstance(error, EnvHung) else (
            "".join(traceback.format_exception_only(type(error), error)).strip())
        log.warning("rollout worker %d: %s failed: %s; re-creating it, its episode dropped (%d of "
                    "hardware.max_env_restarts=%d this hour)", self.id, what, cause, len(self.restarts), limit)
        return True

    def _restart_seed(self, env_index: int):
        seed = env_seed(self.settings.seed, self.id, env_index)
        return None if seed is None else int(seed) + 1_000_003 * len(self.restarts)

    def _close_quietly(self, env) -> None:
        try:
            self.env_call(env.close)
        except BaseException:  # a broken env may fail to close too: it is dropped either way
            pass

    def _check_alive(self) -> None:
        if bool(self.stop_flag[0]) or (self.parent_watch is not None and not self.parent_watch.alive()):
            raise StopRequested()

    def _acquire_slots(self, n: int) -> torch.Tensor:
        """Blocks until the learner has freed enough slots: this is the back-pressure."""
        while len(self.owned) < n:
            self._beat(-1)
            try:
                got = self.free_slots.get(timeout=0.5)
            except queue.Empty:
                got = []
            if not got:  # the wait timed out, or the learner's stop woke it (an empty hand-out: Sampler.stop)
                self._check_alive()
            self.owned.extend(got)
        taken, self.owned = self.owned[:n], self.owned[n:]
        return torch.tensor(taken, dtype=torch.int64)

    def _maybe_sync_weights(self) -> None:
        if self.client is not None:  # the server loads the weights; the worker follows the versions
            self.versions[:] = [store.current_version() for store in self.stores]
            self.version = int(self.versions[0])
            return
        for p in self.followed:
            store = self.stores[p]
            if store.current_version() != self.versions[p]:
                self.versions[p] = store.load_into(self.models[p])
        self.version = int(self.versions[0])

    def _wait_for_learner_round(self) -> None:
        """Synchronous PPO: the next rollout starts only once the learner trained on this one (and
        acts with its new weights: a server's answers from before are dropped)."""
        while int(self.sync_round[0]) < self.round:
            self._beat(-1)
            self._check_alive()
            time.sleep(0.0005)
        if self.client is not None:
            self.client.drop_answers()


def close_all(envs) -> None:
    for env in envs:
        try:
            env.close()
        except Exception:  # closing is best effort: the process is exiting anyway
            pass


def pin_to_core(worker_id: int) -> Optional[int]:
    """hardware.set_workers_cpu_affinity: this process (and the env processes it starts) runs
    on one core, worker i on the i-th (round robin) of the cores this process may use. Returns
    the core, or None where affinity cannot be set (not Linux)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    core = cores[worker_id % len(cores)]
    os.sched_setaffinity(0, {core})
    return core


SINGLE_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def force_single_thread():
    """hardware.force_envs_single_thread: OpenMP and BLAS libraries already loaded here get one
    thread (threadpoolctl), and the variables make those loaded later, and env processes, start
    with one. Returns the threadpoolctl limiter (kept alive: the limits hold while it does)."""
    for var in SINGLE_THREAD_VARS:
        os.environ[var] = "1"
    return threadpool_limits(limits=1)


def decorrelation_delay(settings: WorkerSettings, worker_id: int) -> float:
    """hardware.decorrelate_experience_max_seconds: worker `worker_id`'s pause before its first
    rollout, uniform in [0, max] (seeded by the run's seed and the worker; 0 when max is 0)."""
    limit = settings.process.decorrelate_experience_max_seconds
    if limit <= 0:
        return 0.0
    seed = None if settings.seed is None else [settings.seed, worker_id, 4_242]
    return float(np.random.default_rng(seed).uniform(0.0, limit))


def decorrelation_sleep(worker_id: int, settings: WorkerSettings, check_alive, beat) -> float:
    """Sleeps `decorrelation_delay`, so workers hand in trajectories at spread-out times. The
    worker stays responsive: it stops when asked, and beats so it is not taken for stuck."""
    delay = decorrelation_delay(settings, worker_id)
    end = time.monotonic() + delay
    while time.monotonic() < end:
        beat(-1)
        check_alive()
        time.sleep(min(0.1, max(0.0, end - time.monotonic())))
    return delay


def _fits(value, shape: tuple, dtype) -> bool:
    """Whether `value` writes into a buffer row of this shape and dtype as it is."""
    try:
        return np.asarray(value, dtype=dtype).shape == tuple(shape)
    except (ValueError, TypeError):
        return False


def _shape_and_dtype(value) -> str:
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):  # ragged nested sequences
        return f"of type {type(value).__name__} that is no array"
    return f"of shape {array.shape}, dtype {array.dtype}"


def worker_process_main(worker_cls, worker_id: int, settings: WorkerSettings, buffers, stores, free_slots, out_queue,
                        stop_flag, sync_round, heartbeats, parent_pid: int, channel=None,
                        parent_state: Optional[dict] = None) -> None:
    """Entry point of a worker process (`worker_cls`: SingleAgentWorker or AgentRowsWorker).
    Ctrl+C and SIGTERM are the learner's to handle (a terminal's Ctrl+C, Slurm's scancel and `kill` of the
    process group reach every process): it saves its checkpoint and stops us; a learner that dies is noticed
    (mp.ParentWatch). parent_state: the learner's environment,
    folder and import path (mp.parent_state), taken over first."""
    for stop in mp.STOPPED_BY_THE_LEARNER:
        signal.signal(stop, signal.SIG_IGN)
    if parent_state is not None:
        mp.adopt(parent_state)
    process = settings.process
    torch.set_num_threads(process.torch_threads)
    seed_process(settings.seed, ROLLOUT_WORKER, worker_id)
    os.nice(process.worker_nice)  # children (env processes) inherit it
    core = pin_to_core(process.first_core + worker_id) if process.set_workers_cpu_affinity else None
    limiter = force_single_thread() if process.force_envs_single_thread else None  # noqa: F841 (held for the process)
    worker = None
    try:
        worker = worker_cls(worker_id, settings, buffers, stores, free_slots, out_queue, stop_flag, sync_round,
                            heartbeats, parent_pid, channel)
        out_queue.put(WorkerReady(worker_id))
        if core is not None:
            log.debug("rollout worker %d pinned to core %d", worker_id, core)
        decorrelation_sleep(worker_id, settings, worker._check_alive, worker._beat)
        while True:
            worker.collect()
    except StopRequested:
        pass
    except Fault as e:  # says what happened and where (the env, its step): no traceback
        out_queue.put(WorkerFailed(worker_id, str(e)))
    except BaseException:
        out_queue.put(WorkerFailed(worker_id, traceback.format_exc()))
    finally:
        if worker is not None:
            worker.close()
        mp.exit_without_teardown(out_queue)

