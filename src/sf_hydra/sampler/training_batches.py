"""Turns the workers' trajectory messages into training batches for the learner.

It is an IterableDataset with a (huge) length so that Lightning does not prefetch the next
batch before training on the current one: the synchronous mode and the policy-lag
accounting depend on asking for data only after the weights were published.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch.utils.data import IterableDataset

from sf_hydra.core.clock import seconds_since_launch
from sf_hydra.sampler.sampler import Sampler, SamplerError
from sf_hydra.sampler.settings import BatchSettings, most_slots_per_batch

ENDLESS = 2**62
STAGING_RING = 2


def timing_since(timing: Dict[str, float], began_at: float, since: float) -> Dict[str, float]:
    """The part of a rollout's `timing` (seconds per part; together they cover the worker's wall clock from
    `began_at` to its report) that falls after wall-clock time `since`. The seconds before `since` come out of
    the wait for slots first: a fresh run's workers collect while the learner starts, then wait there until it
    frees slots. What is left comes out of the other parts in proportion. Invariant: the parts stay >= 0 and
    their sum drops by max(0, since - began_at), down to 0. `began_at` 0 (unknown) keeps the timing whole."""
    before = since - began_at
    if began_at <= 0 or before <= 0:
        return timing
    out = dict(timing)
    wait = out.get("wait_for_slots", 0.0)
    if "wait_for_slots" in out:
        out["wait_for_slots"] = wait - min(wait, before)
    rest = before - min(wait, before)
    others = sum(v for k, v in out.items() if k != "wait_for_slots")
    if rest > 0 and others > 0:
        keep = max(0.0, 1.0 - rest / others)
        out = {k: v if k == "wait_for_slots" else v * keep for k, v in out.items()}
    return out


class Received:
    """What the workers reported since the last batch: it goes with the next batch as `meta`. Worker seconds
    count from `since`, the learner's first request for data: what a worker spent before (collecting, then
    waiting, while the learner started) belongs to start-up, not to the session's profile."""

    def __init__(self, num_policies: int):
        self.num_policies = num_policies
        self.since = time.time()
        self.reset()

    def reset(self) -> None:
        self.frames, self.episodes, self.games, self.dropped, self.wait = 0, [], [], 0, 0.0
        self.gather = 0.0  # seconds spent copying the batch out of the slots
        self.start = 0.0  # seconds spent starting the sampler's processes (the first batch's)
        self.nonfinite_replaced = 0
        self.env_restarts = 0
        self.policy_frames = [0] * self.num_policies
        self.timing: Dict[str, float] = {}

    def add(self, traj) -> None:
        self.frames += traj.frames
        self.episodes.extend(traj.episodes)
        self.games.extend(traj.games)
        self.nonfinite_replaced += traj.nonfinite_replaced
        self.env_restarts += traj.env_restarts
        for key, seconds in timing_since(traj.timing, traj.began_at, self.since).items():
            self.timing[key] = self.timing.get(key, 0.0) + seconds

    def meta(self, policy: int) -> dict:
        meta = {"policy": policy, "frames": self.frames, "policy_frames": self.policy_frames,
                "episodes": self.episodes, "games": self.games, "dropped_trajectories": self.dropped,
                "wait_seconds": self.wait, "gather_seconds": self.gather, "start_seconds": self.start,
                "worker_seconds": self.timing,
                "nonfinite_replaced": self.nonfinite_replaced,
                "env_restarts": self.env_restarts}
        self.reset()
        return meta


class TrainingBatches(IterableDataset):
    """Batches of one policy each (`meta["policy"]`). A slot holding transitions of several
    policies (policies change at episode ends) goes to each of their learners, and is freed
    once all of them took it; each learner trains only on its own transitions
    (`batch["policy_ids"]`). Async: a batch is `batch_size * num_batches_per_epoch` transitions
    of one policy, served as soon as a policy has one: with several policies, trajectories in
    arrival order until they hold that many of the policy's own transitions (or
    `most_slots_per_batch` trajectories), so that a policy trains on as many of its own
    transitions per iteration as a single policy does (`meta["full_trajectories"]` then tells the
    learner a full batch's trajectory count, which sets its minibatches). Sync: once a whole round
    arrived, each policy's share of it in batches of at most `traj_per_batch` trajectories; then
    the next round starts."""

    def __init__(self, sampler: Sampler, settings: BatchSettings, current_version: Callable[[int], int],
                 stop_requested: Callable[[], bool], on_start: Callable[[], None],
                 first_version: Callable[[int], int] = lambda policy: 0):
        """current_version(policy): the learner's version of that policy (the last it published);
        first_version(policy): the oldest version whose steps may train it (its weights' last replacement)."""
        self.sampler, self.settings = sampler, settings
        self.current_version, self.stop_requested, self.on_start = current_version, stop_requested, on_start
        self.first_version = first_version
        workers = sampler.settings.workers  # what the sampler's workers decide with: rollout rounds, policies
        self.traj_per_batch = settings.traj_per_batch
        self.rollout = sampler.buffers.rollout
        self.batch_rows = self.traj_per_batch * self.rollout  # a full asynchronous batch's own transitions
        self.most_slots = most_slots_per_batch(self.traj_per_batch, workers.num_policies)
        self.sync = workers.sync
        self.round_size = sampler.rows_total
        self.num_policies = workers.num_policies
        self.frameskip = workers.envs.frameskip
        self.stall_timeout_sec = workers.stall_timeout_sec
        self.benchmark = settings.benchmark
        self.shared: Dict[int, int] = {}  # slot -> learners that have yet to take it (slots of several policies)
        # Per policy: each queued slot's count of that policy's transitions, and their sum over its queue.
        self.own: List[Dict[int, int]] = [{} for _ in range(self.num_policies)]
        self.queued_rows = [0] * self.num_policies
        self.first_trajectory_s: Optional[float] = None  # seconds from launch to the learner's first trajectory
        self.first_rollout_s: Optional[float] = None  # ... to a worker reporting that trajectory
        # A CUDA learner: batches are gathered into pinned staging memory, so that moving one to
        # the device is a non-blocking DMA copy. A set is reused STAGING_RING batches later: its
        # copy to the device finished long before (the training step in between synchronizes).
        self.pin = settings.pin_memory
        self.staging: List[Dict[str, torch.Tensor]] = []
        self.batches_gathered = 0
        # Trajectories that wait for a batch after the last one yielded (their data is in the shared slots):
        # serial mode's checkpoint holds the workers' state only when none wait (Door.serial_state).
        self.waiting = 0

    def __len__(self) -> int:
        return ENDLESS

    def __iter__(self):
        received = Received(self.num_policies)
        if not self.sampler.started:
            t_start = time.monotonic()
            self.on_start()
            received.start = time.monotonic() - t_start
        pending = [deque() for _ in range(self.num_policies)]
        self.own, self.queued_rows = [{} for _ in pending], [0] * len(pending)
        in_round, turn = 0, 0
        replacements = self._replacements()
        while True:
            t0 = time.monotonic()
            silent_since = t0
            while not self._ready(pending, in_round):
                if self.stop_requested():
                    return
                traj = self.sampler.poll()
                if traj is None:
                    self._check_stall(silent_since)
                    continue
                silent_since = time.monotonic()
                if self.first_trajectory_s is None:
                    self.first_trajectory_s = seconds_since_launch()
                    # when a worker reported it (it may have waited in the queue while the learner started)
                    self.first_rollout_s = traj.sent_at - (time.time() - self.first_trajectory_s)
                in_round += len(traj.slots)
                received.add(traj)
                self._sort(traj.slots, pending, received)
                if not self.sync:
                    received.dropped += self._drop_stale(pending)
            received.wait += time.monotonic() - t0
            policy = self._next_policy(pending, turn)
            turn = policy + 1
            slots = self._take(policy, pending[policy])
            t1 = time.monotonic()
            # benchmark: the trajectories are dropped uncopied; the batch is only what the workers reported
            batch = {} if self.benchmark else self._gather(torch.tensor(slots, dtype=torch.int64))
            self._release(slots)
            received.gather += time.monotonic() - t1
            batch["meta"] = received.meta(policy)
            batch["meta"]["full_trajectories"] = self.traj_per_batch if len(slots) > self.traj_per_batch else None
            batch["meta"]["first_rollout_s"] = self.first_rollout_s
            batch["meta"]["first_trajectory_s"] = self.first_trajectory_s
            self.waiting = sum(len(p) for p in pending) + (in_round if self.sync else 0)
            yield batch
            if self._replaced_since(replacements):  # PBT gave a policy other weights during that step
                replacements = self._replacements()
                received.dropped += self._drop_stale(pending)
            if self.sync and in_round >= self.round_size and not any(pending):
                self.sampler.release_round()
                in_round = 0

    def _gather(self, slots: torch.Tensor) -> Dict[str, torch.Tensor]:
        """The slots' trajectories as one batch: a fresh tensor per field, or (CUDA learner)
        views of the next pinned staging set."""
        buffers = self.sampler.buffers
        if not self.pin:
            return buffers.gather(slots)
        if len(self.staging) < STAGING_RING:
            self.staging.append(buffers.staging(self.most_slots, pin=True))
        out = self.staging[self.batches_gathered % len(self.staging)]
        self.batches_gathered += 1
        return buffers.gather(slots, out=out)

    def _ready(self, pending, in_round: int) -> bool:
        if self.sync:
            return in_round >= self.round_size and any(pending)
        return any(self._full(k, queue) for k, queue in enumerate(pending))

    def _full(self, policy: int, queue) -> bool:
        """Async: whether `policy`'s queue holds a whole batch: a batch's count of its own transitions, or the
        most trajectories a batch takes (the bound the workers' slots are sized for: plan.policy_rounds)."""
        return self.queued_rows[policy] >= self.batch_rows or len(queue) >= self.most_slots

    def _next_policy(self, pending, turn: int) -> int:
        """The next policy with a batch to train on, taking turns."""
        for i in range(self.num_policies):
            policy = (turn + i) % self.num_policies
            if (pending[policy] if self.sync else self._full(policy, pending[policy])):
                return policy
        raise AssertionError("no policy has a batch")  # _ready said one has

    def _take(self, policy: int, queue) -> List[int]:
        """The next batch's slots off `policy`'s queue, oldest first. Sync: up to `traj_per_batch`. Async: until
        they hold a full batch's count of the policy's own transitions (`traj_per_batch` whole trajectories when
        none changed policy), at most `most_slots`."""
        own = self.own[policy]
        slots, rows = [], 0
        if self.sync:
            slots = [queue.popleft() for _ in range(min(self.traj_per_batch, len(queue)))]
        else:
            while queue and rows < self.batch_rows and len(slots) < self.most_slots:
                slots.append(queue.popleft())
                rows += own[slots[-1]]
        for s in slots:
            self.queued_rows[policy] -= own.pop(s)
        return slots

    def _queue(self, policy: int, slots: List[int], rows: List[int]) -> None:
        """Records each of `slots` (which the caller appends to `pending[policy]`) with its count of the
        policy's transitions, and adds them to the queue's sum."""
        own = self.own[policy]
        for s, n in zip(slots, rows):
            own[s] = n
        self.queued_rows[policy] += sum(rows)

    def _sort(self, slots: List[int], pending, received: Received) -> None:
        """Queues each slot for every policy that acted in it, and counts each policy's env steps."""
        if self.num_policies == 1:
            pending[0].extend(slots)  # one policy: its env steps are the run's frames
            self._queue(0, slots, [self.rollout] * len(slots))
            return
        ids = self.sampler.buffers["policy_ids"][torch.tensor(slots, dtype=torch.int64)]
        counts = torch.nn.functional.one_hot(ids, self.num_policies).sum(1)  # [slots, policies]
        for k, n in enumerate((counts.sum(0) * self.frameskip).tolist()):
            received.policy_frames[k] += n
        acted = counts > 0
        for k, column in enumerate(counts.t().tolist()):
            mine = [(s, n) for s, n in zip(slots, column) if n > 0]
            pending[k].extend(s for s, _ in mine)
            self._queue(k, [s for s, _ in mine], [n for _, n in mine])
        for s, n in zip(slots, acted.sum(1).tolist()):
            if n > 1:
                self.shared[s] = n

    def _release(self, slots: List[int]) -> None:
        """Frees the slots no other learner still has to take."""
        free = []
        for s in slots:
            left = self.shared.get(s, 1) - 1
            if left > 0:
                self.shared[s] = left
            else:
                self.shared.pop(s, None)
                free.append(s)
        if free:
            self.sampler.free(free)

    def _replacements(self) -> Tuple[int, ...]:
        """Each policy's first trainable version (its weights' last replacement)."""
        return tuple(self.first_version(k) for k in range(self.num_policies))

    def _replaced_since(self, seen: Tuple[int, ...]) -> bool:
        """Whether a policy's weights were replaced since `seen`: only then can trajectories already waiting
        have become untrainable between two batches (checking every waiting trajectory after each learner
        step measurably cost frames per second: benchmarks/README.md)."""
        return self._replacements() != seen

    def _drop_stale(self, pending) -> int:
        """Drops, per policy, trajectories whose oldest step of that policy is older than it may train on:
        acted before its weights' last replacement (`first_version`), or (async) more than max_policy_lag
        versions old."""
        dropped = 0
        for k, queue in enumerate(pending):
            if not queue:
                continue
            oldest_allowed = self.first_version(k)
            if not self.sync:
                oldest_allowed = max(oldest_allowed, self.current_version(k) - self.settings.max_policy_lag)
            slots = torch.tensor(list(queue), dtype=torch.int64)
            versions = self.sampler.buffers["policy_versions"][slots]
            if self.num_policies > 1:
                mine = self.sampler.buffers["policy_ids"][slots] == k
                versions = torch.where(mine, versions, torch.iinfo(torch.int64).max)
            stale_mask = versions.min(1).values < oldest_allowed
            stale = slots[stale_mask].tolist()
            if stale:
                queue.clear()
                queue.extend(slots[~stale_mask].tolist())
                for s in stale:
                    self.queued_rows[k] -= self.own[k].pop(s)
                self._release(stale)
                dropped += len(stale)
        return dropped

    def _check_stall(self, silent_since: float) -> None:
        """No trajectory from any worker for the stall limit: a worker that is stuck is named
        (Sampler._watch); otherwise they all wait, and this says so."""
        limit = self.sampler.stall_limit()
        if time.monotonic() - silent_since > limit:
            self.sampler.check_workers()
            raise SamplerError(
                f"no trajectory from any rollout worker for {limit:.0f} s "
                f"(hardware.worker_stall_timeout_sec={self.stall_timeout_sec:g}): "
                "an env may be hanging"
            )
