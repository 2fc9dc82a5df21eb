"""The rollout worker for multi-agent envs and batched sampling: one trajectory row per
agent (of each multi-agent env) or per sub-env (of each vector env), each row with its own
slot, write position and RNN state.

Inactive transitions are not recorded at all (rather than recorded and masked): an
inactive row's policy step is computed with the others (one batched forward) but nothing
is written, its write position does not move and its RNN state is kept as it was. A slot
therefore holds `rollout` consecutive *active* transitions of one agent, so everything
downstream is unchanged and exact:

- GAE: the next value of a recorded transition is that of the agent's next recorded one,
  which is its next active observation (the time it spent inactive is skipped, like a
  pause). A slot is complete after `rollout` transitions but is sent only once the value
  of the agent's next active observation is known (its bootstrap value): at its next
  active step, or in the pass at the end of each round of `rollout` steps.
- Dones: a done that happens while the agent is inactive is written onto its last
  recorded transition, which is still ours to edit (the slot holding it has not been sent,
  for lack of a bootstrap value), so GAE never bootstraps across episodes.
- RNN: the learner unrolls over recorded transitions only, starting from the state stored
  with each chunk; the worker's state skips inactive steps in the same way (kept, then
  zeroed by a done), so both compute the same function.
- Batches hold only real data: no validity mask, no smaller effective batch, input and
  return normalizers never see an inactive agent's observation.

The price: rows fill at different rates, so slots complete at different steps. The worker
still sends one message per round of `rollout` steps (async) with whatever completed; in
sync mode it keeps stepping until it has one slot per row to send, and a transition
recorded before the round's end but sent in the next round has a policy lag of one.

Frames count the agent steps the envs simulated (with inactive ones; vector envs' reset-only
steps excluded); episode lengths count the agent's active steps, and a done whose info
says the game goes on (envs/episode_info.py) does not end the reported episode.
"""

from __future__ import annotations

import time
from typing import List

import numpy as np
import torch

from sf_hydra.core.seeding import env_seed
from sf_hydra.core.trajectory import TrajectoryWriter
from sf_hydra.envs import make_env
from sf_hydra.envs.multi_agent.protocol import is_multi_agent
from sf_hydra.sampler.env_groups import ProtocolEnvGroup, SingleEnvGroup, StepBatch, VectorEnvGroup
from sf_hydra.sampler.episode_tracker import EpisodeTracker
from sf_hydra.sampler.messages import Trajectories
from sf_hydra.sampler.rollout_worker import WorkerBase, close_all
from sf_hydra.sampler.settings import WorkerSettings
from sf_hydra.sampler.vector_envs import make_vector_env


def make_groups(settings: WorkerSettings, env_cfg, worker_id: int) -> list:
    """Batched sampling: one vector env per split. Otherwise one group per env (a multi-agent
    env's agents, or a single-agent env's one row)."""
    layout = settings.layout
    count = layout.worker_num_splits if layout.batched_sampling else layout.num_envs_per_worker
    return [make_group(settings, env_cfg, worker_id, i) for i in range(count)]


def make_group(settings: WorkerSettings, env_cfg, worker_id: int, index: int, seed="default"):
    """The worker's group `index`: the vector env of split `index` (batched sampling), else env `index`."""
    layout = settings.layout
    if layout.batched_sampling:
        per = layout.num_envs_per_worker // layout.worker_num_splits
        seed = env_seed(settings.seed, worker_id, index * per) if seed == "default" else seed
        return VectorEnvGroup(make_vector_env(env_cfg, layout.vector_backend, per, seed))
    env = make_env(env_cfg, seed=env_seed(settings.seed, worker_id, index) if seed == "default" else seed)
    return ProtocolEnvGroup(env) if is_multi_agent(env) else SingleEnvGroup(env)


def _stats_of(batches) -> list:
    """The rows' finished-game statistics (StepBatch.episode_stats) of a split's groups, or
    None when no group has any this step."""
    if all(b.episode_stats is None for b in batches):
        return None
    return [s for b in batches for s in (b.episode_stats or [None] * len(b.rewards))]


class Split:
    """A contiguous run of groups that act and step together."""

    def __init__(self, rows: slice, groups: list, group_rows: list, indices: list):
        self.rows, self.groups, self.group_rows = rows, groups, group_rows
        self.indices = indices  # each group's index in the worker


class AgentRowsWorker(WorkerBase):
    def __init__(self, worker_id: int, settings: WorkerSettings, *args, **kwargs):
        super().__init__(worker_id, settings, *args, **kwargs)
        self.writer = TrajectoryWriter(self.buffers)  # rows at their own steps: written in place, (slot, step)
        self.groups = make_groups(settings, self.env_cfg, worker_id)
        # Batched sampling: a whole worker serves one policy (validated: every policy has one).
        sizes = [g.num_agents for g in self.groups]
        fixed = [worker_id % settings.num_policies] * sum(sizes) if settings.layout.batched_sampling else None
        self._init_policy(self.groups[0].observation_space, self.groups[0].action_space, sizes, fixed)
        bounds = np.cumsum([0] + [g.num_agents for g in self.groups])
        self.num_rows = rows = int(bounds[-1])
        group_rows = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        per_split = len(self.groups) // settings.layout.worker_num_splits
        self.splits = []
        for s in range(0, len(self.groups), per_split):
            members = range(s, s + per_split)
            self.splits.append(Split(slice(group_rows[s].start, group_rows[s + per_split - 1].stop),
                                     [self.groups[i] for i in members], [group_rows[i] for i in members],
                                     list(members)))
        self.obs = self._obs_arrays(rows)
        self.rnn = self._rnn_states(rows)
        self.active = np.ones(rows, dtype=bool)  # the row's next transition is trained on
        self.slot = None  # [rows] slot each row writes into (taken at the first collect)
        self.cursor = np.zeros(rows, dtype=np.int64)  # next write position in that slot
        self.pending = np.full(rows, -1, dtype=np.int64)  # a full slot waiting for its bootstrap value
        self.ready: List[int] = []  # complete slots not sent yet
        # Multi-agent envs: episodes name their agent (per-agent statistics); sub-envs of a vector env do not.
        multi_agent = isinstance(self.groups[0], ProtocolEnvGroup)
        agents = np.concatenate([np.arange(g.num_agents) for g in self.groups]) if multi_agent else None
        self.games = EpisodeTracker(rows, agents)
        self.dropping = set()  # rows whose env was re-created: the done that follows ends no reported game
        for i, (group, r) in enumerate(zip(self.groups, group_rows)):
            obs, active = group.reset(seed=env_seed(settings.seed, worker_id, i))
            steps = self.decorrelation_steps(i)
            if steps and not isinstance(group, VectorEnvGroup):  # a vector env's sub-envs start together
                obs, active = group.random_steps(steps, env_seed(settings.seed, worker_id, i))
                self.dropping.update(range(r.start, r.stop))  # their episodes in progress are partial: unreported
            self._store_obs(r, obs, starting=True)
            self.active[r] = active

    def _store_obs(self, rows: slice, obs: dict, starting: bool = False) -> None:
        """The rows' observations (`starting`: from their first reset or random start steps)."""
        for k, v in obs.items():
            try:
                self.obs[k][rows] = v
            except (ValueError, TypeError) as e:  # numpy's: an observation does not fit the declared space
                raise self._space_broken(k, range(rows.start, rows.stop), v, starting) from e

    def _acquire(self, n: int) -> np.ndarray:
        t0 = time.perf_counter()
        slots = self._acquire_slots(n).numpy()
        self.timing["wait_for_slots"] = self.timing.get("wait_for_slots", 0.0) + time.perf_counter() - t0
        return slots

    # -- one step of one split -------------------------------------------------------------
    def _act_and_step(self, split: Split, episodes: list) -> int:
        rows = split.rows
        obs, rnn_before, out, policies = self._act(rows)
        active = self.active[rows].copy()
        # Recorded: active rows acting with a trained policy (a snapshot's steps are not trained on).
        recording = active if policies is None else active & (policies < self.num_policies)
        local = np.flatnonzero(recording)
        select = None if len(local) == len(active) else torch.from_numpy(local)
        recorded = local + rows.start
        if len(local):
            self._resolve_pending(recorded, out.values if select is None else out.values.index_select(0, select))
            where = self._write_positions(recorded)
            self.writer.write(*where, self._policy_record(obs, out, rnn_before, policies), select)

        actions = out.actions.numpy()
        t2 = time.perf_counter()
        batches = []
        for k, (group, r) in enumerate(zip(split.groups, split.group_rows)):
            self._beat(split.indices[k], self.games.lengths[r.start])
            try:
                batch = self.env_call(group.step, actions[r.start - rows.start : r.stop - rows.start])
            except Exception as error:
                batch = self._restart_group(split, k, error)
            self._store_obs(r, batch.obs)
            batches.append(batch)
        self.timing["env_step"] += time.perf_counter() - t2
        cat = ((lambda f: getattr(batches[0], f)) if len(batches) == 1
               else (lambda f: np.concatenate([getattr(b, f) for b in batches])))
        rewards, terminated, truncated = cat("rewards"), cat("terminated"), cat("truncated")
        bonus = None
        if self.shaping is not None and any(b.shaping_units is not None for b in batches):
            units = np.concatenate([b.shaping_units if b.shaping_units is not None
                                    else np.zeros((len(b.rewards), len(self.shaping[0]))) for b in batches])
            bonus = self._shaping_bonus(units, policies)
            if bonus is not None:
                rewards = rewards + bonus
        self._check_env_output(rows, rewards)
        done = terminated | truncated
        self._count_episodes(rows, rewards, active, done, cat("game_continues"), episodes, _stats_of(batches),
                             bonus)
        if len(local):
            self.writer.write(*where, self._env_record(rewards[local], terminated[local], truncated[local]))
            self._advance(recorded)
        for j in np.flatnonzero(done & ~recording):
            self._end_last_transition(rows.start + int(j), bool(truncated[j] and not terminated[j]))
        if out.rnn_states is not None:
            self._update_rnn(rows, out.rnn_states.float(), rnn_before, active, done)
        self.active[rows] = cat("active")
        self._request(rows)
        return sum(b.frames for b in batches)

    def _restart_group(self, split: Split, k: int, error: Exception) -> StepBatch:
        """Re-creates the k-th env of `split` after `error` (within hardware.max_env_restarts):
        every row of it ends its episode, cut short (truncated) and not reported; else
        re-raises the env's error, which stops the run."""
        index = split.indices[k]
        if not self._may_restart(f"env {index} ({self.settings.envs.env_id!r})", error):
            raise error
        self._close_quietly(split.groups[k])
        group = make_group(self.settings, self.env_cfg, self.id, index, self._restart_seed(index))
        self.groups[index] = split.groups[k] = group
        obs, active = self.env_call(group.reset, seed=self._restart_seed(index))
        rows = split.group_rows[k]
        self.dropping.update(range(rows.start, rows.stop))
        n = group.num_agents
        return StepBatch(obs, np.zeros(n, np.float32), np.zeros(n, bool), np.ones(n, bool), active, 0,
                         np.zeros(n, bool))

    def _write_positions(self, rows: np.ndarray):
        """(slots, steps) where these rows write their next transition."""
        return torch.from_numpy(self.slot[rows]), torch.from_numpy(self.cursor[rows])

    def _resolve_pending(self, rows: np.ndarray, values: torch.Tensor) -> None:
        """The value of these rows' current observation bootstraps their full slot, if any."""
        waiting = np.flatnonzero(self.pending[rows] >= 0)
        if not len(waiting):
            return
        slots = self.pending[rows[waiting]]
        self.writer.write(torch.from_numpy(slots), self.rollout, {"values": values}, torch.from_numpy(waiting))
        self.ready.extend(slots.tolist())
        self.pending[rows[waiting]] = -1

    def _advance(self, recorded: np.ndarray) -> None:
        """The recorded rows move one step on; a row whose slot is full moves to a new slot."""
        self.cursor[recorded] += 1
        full = recorded[self.cursor[recorded] == self.rollout]
        if len(full):
            self.pending[full] = self.slot[full]
            self.cursor[full] = 0
            self.slot[full] = self._acquire(len(full))

    def _end_last_transition(self, row: int, time_out: bool) -> None:
        """A done while inactive ends the episode of the row's last recorded transition."""
        if self.cursor[row] > 0:
            slot, step = int(self.slot[row]), int(self.cursor[row]) - 1
        elif self.pending[row] >= 0:
            slot, step = int(self.pending[row]), self.rollout - 1
        else:
            return  # nothing recorded yet
        dones = self.buffers["dones"]
        if dones[slot, step] == 0:
            dones[slot, step] = 1.0
            self.buffers["time_outs"][slot, step] = float(time_out)

    def _count_episodes(self, rows: slice, rewards, active, done, game_continues, episodes: list,
                        stats=None, bonus=None) -> None:
        self.games.add(rows, rewards, active, bonus)
        for j in np.flatnonzero(done):
            self._episode_end(rows.start + int(j), bool(game_continues[j]), episodes,
                              None if stats is None else stats[j])

    def _update_rnn(self, rows: slice, new: torch.Tensor, before: torch.Tensor, active, done) -> None:
        """Inactive rows keep their state; a done zeroes it."""
        if not active.all():
            new = torch.where(torch.from_numpy(active).unsqueeze(1), new, before)
        if done.any():
            new = new * torch.from_numpy(~done).unsqueeze(1)
        self.rnn[rows] = new

    def _bootstrap_pending(self) -> None:
        """Full slots whose row is active now get their bootstrap value in one forward pass."""
        rows = np.flatnonzero((self.pending >= 0) & self.active)
        if not len(rows):
            return
        self._resolve_pending(rows, self._act(rows)[2].values)

    # -- one message ---------------------------------------------------------------------------
    def collect(self) -> None:
        """`rollout` steps of every row (sync: until one slot per row is complete), then one
        message with the completed slots."""
        self._check_alive()
        if self.sync_mode:
            self._wait_for_learner_round()
        t_start, began_at = time.perf_counter(), time.time()
        self.timing = {"inference": 0.0, "env_step": 0.0, "wait_for_slots": 0.0}
        if self.slot is None:
            self.slot = self._acquire(self.num_rows)
        episodes: list = []
        frames, steps = 0, 0
        while True:
            self._maybe_sync_weights()
            for split in self.splits:
                frames += self._act_and_step(split, episodes)
            steps += 1
            if steps >= self.rollout:
                self._bootstrap_pending()
                if not self.sync_mode or len(self.ready) >= self.num_rows:
                    break
                self._check_alive()
        quota = self.num_rows if self.sync_mode else len(self.ready)
        sent, self.ready = self.ready[:quota], self.ready[quota:]
        self.round += 1
        self.timing["bookkeeping"] = time.perf_counter() - t_start - sum(self.timing.values())
        games, self.finished_games = self.finished_games, []
        replaced, self.nonfinite_replaced = self.nonfinite_replaced, 0
        restarts, self.restarts_done = self.restarts_done, 0
        self.out_queue.put(Trajectories(self.id, sent, episodes, frames * self.frameskip, self.timing, games,
                                        replaced, restarts, began_at=began_at))

    def close(self) -> None:
        close_all(self.groups)
