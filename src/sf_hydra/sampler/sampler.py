"""Owns the rollout side: shared buffers, the policy stores, the worker processes (or, in
serial mode, the same workers in this process) and the queues between them.

Queues carry only slot indices and tiny messages. A worker that dies, raises, or stays
silent too long becomes a `SamplerError` naming the worker and its traceback.

Single-agent envs use `SingleAgentWorker` (one slot per env and rollout). Multi-agent envs and
`hardware.batched_sampling=true` use `AgentRowsWorker` (one row per agent or sub-env, rows
that may skip inactive transitions: see agent_rows_worker.py).
"""

from __future__ import annotations

import logging
import os
import queue
import time
from typing import Dict, List, Optional, Union

import torch

from sf_hydra.core.clock import said_while_slow
from sf_hydra.core.door import SamplerHealth
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.seal import key_path
from sf_hydra.core.seeding import restore_random_states
from sf_hydra.core.trajectory import TrajectoryBuffers, TrajectorySpec
from sf_hydra.sampler import mp
from sf_hydra.sampler.agent_rows_worker import AgentRowsWorker
from sf_hydra.sampler.inference_server import InferenceChannel, server_process_main
from sf_hydra.sampler.messages import DeviceWeights, ServerFailed, Trajectories, WorkerFailed, WorkerReady
from sf_hydra.sampler.policy_store import PolicyStore
from sf_hydra.sampler.rollout_worker import BEAT_TIME, BEAT_WAITING_FOR_SERVER, WorkerBase, worker_process_main
from sf_hydra.sampler.settings import SamplerSettings, Spaces
from sf_hydra.sampler.single_agent_worker import SingleAgentWorker, seal_snapshot, snapshot_sealed
from sf_hydra.sampler.vector_envs import check_batched_sampling

log = logging.getLogger(__name__)


class SamplerError(RuntimeError):
    """A rollout worker failed; the message says which and why."""


def check_sampling_options(cfg, num_agents: Optional[int]) -> None:
    """The rules that need the env's agent count (read from one env before any worker starts)."""
    check_batched_sampling(cfg)
    if num_agents is not None and cfg.hardware.batched_sampling:
        raise ConfigError("hardware.batched_sampling", True,
                          f"false for a multi-agent env ({cfg.env.id!r} has {num_agents} agents)")
    for key, value, on in (("env.episode_counter", cfg.env.episode_counter, cfg.env.episode_counter),
                           ("env.pixel_format", cfg.env.pixel_format, str(cfg.env.pixel_format) == "HWC")):
        if num_agents is not None and on:
            raise ConfigError(key, value,
                              f"its default for a multi-agent env ({cfg.env.id!r}): it wraps single-agent envs")
    check_policy_assignment(cfg, num_agents)
    if cfg.selfplay.pool_size > 0 and (num_agents or 1) < 2:
        raise ConfigError("selfplay.pool_size", cfg.selfplay.pool_size,
                          f"0 for env {cfg.env.id!r}: it seats {num_agents or 1} agent, and snapshots need opponent "
                          "seats (a multi-agent env with at least 2 agents)")


def check_policy_assignment(cfg, num_agents: Optional[int]) -> None:
    """algo.policy_assignment=fixed gives each env one policy for the whole run: single-agent envs only (a
    multi-agent env's seats are drawn per episode). The rules without the agent count: validation.py."""
    choice = str(cfg.algo.policy_assignment)
    if choice == "fixed" and num_agents is not None:
        raise ConfigError("algo.policy_assignment", choice,
                          f"auto or per_episode for a multi-agent env ({cfg.env.id!r} has {num_agents} agents: its "
                          "seats are drawn per episode, pbt.mix_policies_in_one_env)")


def assignment_line(settings: SamplerSettings) -> str:
    """What algo.policy_assignment resolved to for single-agent envs, in words (logged at start)."""
    workers = settings.workers
    envs, n = settings.slots.num_workers * workers.layout.num_envs_per_worker, workers.num_policies
    if workers.seats.env_policies is None:
        return (f"each of the {envs} envs draws its policy at every episode start (algo.policy_assignment: "
                "per_episode, or auto with envs that are not a multiple of the policies)")
    return (f"each policy acts in {envs // n} of the {envs} envs for the whole run (algo.policy_assignment: "
            f"fixed, contiguous blocks of hardware.num_workers x num_envs_per_worker)")


def _sealed(state: object) -> bool:
    """Whether `state` (Sampler.serial_state's, from a checkpoint: plain data that may come from anywhere) holds
    worker snapshots that each carry this user's seal: only then may any of them be unpickled."""
    if not isinstance(state, dict):
        return False
    workers, seals = state.get("workers"), state.get("seals")
    return isinstance(workers, list) and isinstance(seals, list) and 0 < len(workers) == len(seals) and all(
        isinstance(w, torch.Tensor) and w.dtype == torch.uint8 and snapshot_sealed(w.numpy().tobytes(), mac)
        for w, mac in zip(workers, seals))


class Sampler:
    """The worker processes and what they share, built from the run plan's pieces (sf_hydra/plan.py):
    `settings` (slots, timeouts, inference placement, the workers' config), the trajectory `spec`,
    the env's `spaces` and a `model` that gives the weights' layout (every trained policy and opponent
    snapshot has its store)."""

    def __init__(self, settings: SamplerSettings, spec: TrajectorySpec, spaces: Spaces, model: torch.nn.Module):
        self.settings = settings
        self.ctx = mp.context()
        stale = mp.remove_stale_shared_memory()
        if stale:
            log.info("removed %d shared-memory files left by killed runs (/dev/shm/torch_<pid>_*)", stale)
        slots = settings.slots
        self.num_workers = slots.num_workers
        self.worker_cls = AgentRowsWorker if slots.agent_rows else SingleAgentWorker
        self.rows_per_worker = slots.rows_per_worker
        self.per_worker = slots.per_worker
        self.num_policies = settings.workers.num_policies
        if self.num_policies > 1 and not slots.agent_rows:
            log.info("%d policies: %s", self.num_policies, assignment_line(settings))
        with mp.signals_deferred():  # see there: a stop signal must not land inside share_memory_()
            mp.start_shm_manager()
            self._allocate(spec, model)
        self.serial = settings.serial
        self.obs_space, self.action_space = spaces.observation, spaces.action
        self.num_servers = settings.inference_servers
        self.channels = self._inference_channels(model)
        # The learner's messages to each server (DeviceWeights): (server's end, learner's end).
        self.control = [self.ctx.Pipe(duplex=False) for _ in range(self.num_servers)]
        self.out_queue = queue.Queue() if self.serial else self.ctx.Queue()
        self.free_queues = [queue.Queue() if self.serial else self.ctx.Queue() for _ in range(self.num_workers)]
        self.processes: list = []
        self.serial_workers: List[WorkerBase] = []
        self._next_serial = 0
        self._backlog: list = []
        self.started = False
        self.slots_handed_out = False  # launch(hand_out_slots=True) gave the workers their slots already
        self.ready_workers: set = set()  # workers that reported WorkerReady (start waits for all)
        self._restore: Optional[tuple] = None  # serial mode: a checkpoint's worker state, put back in start()

    def _allocate(self, spec: TrajectorySpec, model) -> None:
        """Everything the processes share, in shared memory: buffers, weights, signals."""
        settings = self.settings
        self.buffers = TrajectoryBuffers.allocate(spec, settings.slots.total, settings.workers.rollout)
        # Policy ids: the trained policies, then the opponent pool's slots (version 0: empty).
        self.stores = [PolicyStore(model, shaping_size=settings.shaping_size)
                       for _ in range(self.num_policies)]
        self.stores += [PolicyStore(model, shaping_size=settings.shaping_size, odds_size=self.num_policies)
                        for _ in range(settings.workers.seats.pool_size)]
        self.stop_flag = torch.zeros(1, dtype=torch.int64).share_memory_()
        # Each worker's progress (rollout_worker.BEAT_*): watched so that a stuck worker is named.
        self.heartbeats = torch.zeros(self.num_workers, 3, dtype=torch.float64).share_memory_()
        self._next_watch = 0.0
        self.sync_round = torch.zeros(1, dtype=torch.int64).share_memory_()

    def _inference_channels(self, model) -> Dict[int, InferenceChannel]:
        """hardware.inference=server: a channel per worker; worker w is served by server w mod n."""
        if not self.num_servers:
            return {}
        with mp.signals_deferred():
            return {w: InferenceChannel(w, w % self.num_servers, self.rows_per_worker, self.obs_space,
                                        self.buffers.spec, model.rnn_state_size, self.ctx.Pipe(duplex=True))
                    for w in range(self.num_workers)}

    @property
    def rows_total(self) -> int:
        """Trajectory rows over all workers: the slots of one synchronous round."""
        return self.num_workers * self.rows_per_worker

    # -- life cycle ----------------------------------------------------------------------------
    def launch(self, hand_out_slots: bool = False) -> None:
        """Starts the worker processes: each imports, builds its envs and its policy copy, then waits for its
        slots. train.py launches them before its own slow imports (Lightning), so both go on at once.
        By default the slots come with `start`, after the learner published its weights. With
        `hand_out_slots` they come now, and the workers collect with the weights the stores hold already: the
        caller's promise that those are the learner's initial weights (train.py: a fresh run, whose models it
        built from the same random state as the learner's)."""
        if self.serial or self.processes:
            return
        if hand_out_slots:
            self._hand_out_slots()
        workers = self.settings.workers
        state = mp.parent_state()
        for k in range(self.num_servers):
            served = {w: ch for w, ch in self.channels.items() if ch.server_id == k}
            args = (k, workers, self.obs_space, self.action_space, self.stores, served, self.control[k][0],
                    self.out_queue, self.stop_flag, os.getpid(), state)
            p = self.ctx.Process(target=server_process_main, args=args, name=f"inference-server-{k}", daemon=True)
            p.start()
            self.processes.append(p)
        for policy, store in enumerate(self.stores):  # servers started anew: they need the device tensors again
            if store.device_flat is not None:
                self._send_device_weights(policy)
        for w in range(self.num_workers):
            args = (self.worker_cls, w, workers, self.buffers, self.stores, self.free_queues[w], self.out_queue,
                    self.stop_flag, self.sync_round, self.heartbeats, os.getpid(), self.channels.get(w), state)
            p = self.ctx.Process(target=worker_process_main, args=args, name=f"rollout-worker-{w}", daemon=True)
            p.start()
            self.processes.append(p)

    def start(self) -> None:
        """Hands every worker its slots, starts them (unless `launch` did) and waits until each has built its
        envs."""
        self._hand_out_slots()
        if self.serial:
            self.serial_workers = [
                self.worker_cls(w, self.settings.workers, self.buffers, self.stores, self.free_queues[w],
                                self.out_queue, self.stop_flag, self.sync_round, self.heartbeats, parent_pid=None)
                for w in range(self.num_workers)
            ]
            self._restore_serial()
        else:
            self.launch()
            self._wait_ready()
        self.started = True

    # -- serial mode's resumable state ---------------------------------------------------------
    def serial_state(self) -> Optional[dict]:
        """Serial mode, between two learner steps: each worker's state (SingleAgentWorker.snapshot: its envs
        mid-episode and their generators, observations, episodes in progress) with this user's seal of it, and
        whose rollout comes next, as uint8 tensors, strings and ints (a checkpoint holds them, loaded with
        weights_only). None when the workers run in processes of their own (their state is theirs), or before
        they started. Raises for envs that cannot be pickled (a Doom game with bots; a single-player one
        pickles its replay log: envs/doom/env.py), a worker kind without snapshots, or no seal key."""
        if not self.serial or not self.serial_workers:
            return None
        snapshots = [w.snapshot() for w in self.serial_workers]
        return {"next_worker": self._next_serial,
                "workers": [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in snapshots],
                "seals": [seal_snapshot(b) for b in snapshots]}

    def restore_serial_state(self, state: dict, generators: Optional[dict] = None,
                             origin: str = "the checkpoint") -> None:
        """`serial_state`'s result, read from `origin` (named when it is dropped), put back when the serial
        workers are built (start); then this process's `generators` (seeding.random_states): building the
        workers draws from them (their policy copies' initial weights), which the saved run did before its
        checkpoint, not after."""
        self._restore = (state, generators, origin)
        if self.serial_workers:
            self._restore_serial()

    def _restore_serial(self) -> None:
        """Puts the saved state back, unless a snapshot's seal does not verify (a checkpoint from elsewhere,
        another user's, or saved before seals): then no snapshot is unpickled, one line says so, and the run
        goes on with the envs built at start-up and the saved generators."""
        if self._restore is None:
            return
        (state, generators, origin), self._restore = self._restore, None
        if not _sealed(state):
            log.warning("%s: its rollout workers' state carries no seal of this user's key (%s), so it is not "
                        "unpickled: the run resumes without the sampler's state (its envs start anew), not "
                        "bit-identically", origin, key_path())
        elif len(state["workers"]) != len(self.serial_workers):
            log.warning("the checkpoint holds %d serial workers' state, this run has %d: the envs start anew",
                        len(state["workers"]), len(self.serial_workers))
            return
        else:
            for worker, snapshot, mac in zip(self.serial_workers, state["workers"], state["seals"]):
                worker.restore(snapshot.numpy().tobytes(), mac)
            self._next_serial = int(state["next_worker"])
            log.info("%d serial rollout workers continue from the checkpoint (their envs mid-episode)",
                     len(self.serial_workers))
        if generators is not None:
            restore_random_states(generators)

    def _hand_out_slots(self) -> None:
        """Each worker's own slots, once per sampler (twice would let two rollouts write one slot)."""
        if self.slots_handed_out:
            return
        for w in range(self.num_workers):
            self.free_queues[w].put(list(range(w * self.per_worker, (w + 1) * self.per_worker)))
        self.slots_handed_out = True

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.settings.worker_start_timeout_sec
        waiting = lambda: (f"waiting for the rollout workers to build their envs: {len(self.ready_workers)} of "  # noqa: E731
                           f"{self.num_workers} ready")
        with said_while_slow(waiting, log):
            while len(self.ready_workers) < self.num_workers:
                msg = self._get(deadline - time.monotonic(), during="start-up")
                if isinstance(msg, WorkerReady):
                    self.ready_workers.add(msg.worker_id)
                else:  # a fast worker's first trajectories: keep them for poll()
                    self._backlog.append(msg)
        log.info("%d rollout workers ready (%d envs each)", self.num_workers,
                 self.settings.workers.layout.num_envs_per_worker)

    def stop(self) -> None:
        """Stops every worker and reaps it; a worker that does not exit in time is killed."""
        self.stop_flag[0] = 1
        self._wake_workers()
        for w in self.serial_workers:
            w.close()
        self.serial_workers = []
        deadline = time.monotonic() + 10.0
        for p in self.processes:
            while p.is_alive() and time.monotonic() < deadline:
                self._drain()  # a worker cannot exit while its queued messages are unread
                p.join(timeout=0.05)
        for p in self.processes:
            if p.is_alive():
                log.warning("worker %s did not stop in time: killing it", p.name)
                p.kill()
                p.join(timeout=5.0)
        self.processes = []
        self.started = False
        self.slots_handed_out = False
        self.ready_workers = set()

    def _wake_workers(self) -> None:
        """Hands every worker process an empty list of slots: one blocked in its wait for free slots (the learner
        stopped freeing them) sees the stop flag at once rather than when its wait times out, so the run's end
        does not wait on it."""
        if not self.processes:  # serial workers are closed in this process; nothing was started
            return
        for w in range(self.num_workers):
            try:
                self.free_queues[w].put([])
            except (OSError, ValueError):  # its queue is closed: nothing waits on it
                pass

    def _drain(self) -> None:
        self._messages_waiting()

    # -- messages ------------------------------------------------------------------------------
    def _get(self, timeout: float, during: str) -> Union[WorkerReady, Trajectories]:
        """Next message; raises SamplerError when a worker failed, died or went silent."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            try:
                msg = self.out_queue.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                self._check_processes()
                if time.monotonic() >= deadline:
                    raise SamplerError(
                        f"no message from the rollout workers for {timeout:.0f} s during {during} "
                        f"(hardware.worker_start_timeout_sec / worker_stall_timeout_sec)"
                    )
                continue
            return self._checked(msg)

    @staticmethod
    def _checked(msg):
        if isinstance(msg, WorkerFailed):
            raise SamplerError(f"rollout worker {msg.worker_id} failed:\n{msg.traceback}")
        if isinstance(msg, ServerFailed):
            raise SamplerError(f"inference server {msg.server_id} (hardware.inference=server) failed:\n"
                               f"{msg.traceback}")
        return msg

    def _check_processes(self) -> None:
        """A dead sampler process is an error; its own failure report, when it sent one before exiting
        (mp.exit_without_teardown flushes it), is the error: it holds the cause (the env's traceback)."""
        for p in self.processes:
            if not p.is_alive():
                for msg in self._messages_waiting():
                    self._checked(msg)  # raises for a WorkerFailed / ServerFailed
                raise SamplerError(f"{p.name} (pid {p.pid}) died with exit code {p.exitcode}")

    def _messages_waiting(self) -> list:
        """Every message already in the queue (a dead process's last ones are all there)."""
        got = []
        try:
            while True:
                got.append(self.out_queue.get_nowait())
        except (queue.Empty, OSError, ValueError):
            return got

    def _watch(self) -> None:
        """`check_workers`, at most every half second."""
        now = time.monotonic()
        if now < self._next_watch or self.serial:
            return
        self._next_watch = now + 0.5
        self.check_workers()

    def check_workers(self) -> None:
        """A dead worker process, or one that made no progress (an env step or reset that never
        returns) for hardware.worker_stall_timeout_sec, is an error that names the worker, the env
        and its step. With env restarts on, a worker first gets half as long again to re-create a
        hung env itself. Serial mode: nothing to check (the workers run in this process)."""
        if self.serial:
            return
        self._check_processes()
        limit = self.stall_limit()
        for w, (beat, env, step) in enumerate(self.heartbeats.tolist()):
            age = time.time() - beat
            if beat > 0 and age > limit:
                where = (f"waiting for inference server {w % max(1, self.num_servers)}"
                         if env == BEAT_WAITING_FOR_SERVER
                         else "waiting for free slots or the learner" if env < 0
                         else f"in env {int(env)} ({self.settings.workers.envs.env_id!r}) at step {int(step) + 1} "
                              "of its episode")
                raise SamplerError(f"rollout worker {w} made no progress for {age:.0f} s "
                                   f"(hardware.worker_stall_timeout_sec={self.settings.workers.stall_timeout_sec:g}): "
                                   f"stuck {where}")

    def stall_limit(self) -> float:
        """Seconds without progress before the learner gives up on a worker (or on all of them)."""
        return self.settings.stall_limit

    def poll(self, timeout: float = 0.5) -> Optional[Trajectories]:
        """The next worker message, or None if none came within `timeout` seconds."""
        if self.serial:
            return self._collect_serial()
        self._watch()
        try:
            msg = self._backlog.pop(0) if self._backlog else self.out_queue.get(timeout=timeout)
        except queue.Empty:
            self._check_processes()
            return None
        msg = self._checked(msg)
        if isinstance(msg, WorkerReady):  # polled before start(): start must not wait for it again
            self.ready_workers.add(msg.worker_id)
        return msg if isinstance(msg, Trajectories) else None

    def _collect_serial(self) -> Trajectories:
        """Serial mode: the workers run their rollouts right here, in turn."""
        if self.out_queue.empty():
            worker = self.serial_workers[self._next_serial]
            self._next_serial = (self._next_serial + 1) % self.num_workers
            worker.collect()
        return self._checked(self.out_queue.get_nowait())

    def free(self, slots: List[int]) -> None:
        """Returns copied-out slots to the workers that own them."""
        by_worker: Dict[int, List[int]] = {}
        for s in slots:
            by_worker.setdefault(s // self.per_worker, []).append(s)
        for w, owned in by_worker.items():
            self.free_queues[w].put(owned)

    def publish(self, policy: int, model: torch.nn.Module, version: int) -> None:
        """With inference servers on the learner's CUDA device, the weights go device to device: the
        first publish from that device shares a tensor there with every server, then writes into it."""
        store = self.stores[policy]
        if store.device_flat is None and self._servers_share_device(model):
            self.share_store_on_device(policy, next(model.parameters()).device)
        store.publish(model, version)

    def _servers_share_device(self, model: torch.nn.Module) -> bool:
        if not self.num_servers or self.serial or not self.settings.workers.acting.inference_device.startswith("cuda"):
            return False
        param = next(model.parameters(), None)
        return param is not None and param.is_cuda

    def share_store_on_device(self, policy: int, device: torch.device) -> None:
        """Allocates policy `policy`'s store on `device` and sends it to every inference server,
        before the publish that first writes there (a server that sees that version reads its
        control pipe first)."""
        self.stores[policy].share_on_device(device)
        self._send_device_weights(policy)

    def _send_device_weights(self, policy: int) -> None:
        flat = self.stores[policy].device_flat
        for _, learner_end in self.control:
            try:
                learner_end.send(DeviceWeights(policy, flat))
            except OSError:  # the server's end is closed: name the dead server if that is why
                self._check_processes()
                raise

    def set_reward_shaping(self, policy: int, difference) -> None:
        """Policy `policy`'s reward-shaping weights minus the env's (PolicyStore.reward_shaping)."""
        self.stores[policy].set_reward_shaping(difference)

    def publish_opponent(self, slot: int, model: torch.nn.Module, generation: int, odds=None) -> None:
        """The opponent pool's slot `slot` (selfplay.pool_size of them, after the trained policies'
        stores) holds `model` as its version `generation`, drawn with `odds` per trained policy (None:
        even odds, 1.0), set before the weights so that no worker draws the new snapshot with the old odds."""
        if not 0 <= slot < len(self.stores) - self.num_policies:
            raise IndexError(f"opponent pool slot {slot} of {len(self.stores) - self.num_policies}")
        store = self.stores[self.num_policies + slot]
        if odds is None:
            store.odds.fill_(1.0)
        else:
            store.odds.copy_(torch.as_tensor(odds, dtype=torch.float64))
        store.publish(model, generation)

    def set_opponent_odds(self, slot: int, odds) -> None:
        """Per trained policy, the weight of drawing pool slot `slot` as its opponent (PolicyStore.odds)."""
        self.stores[self.num_policies + slot].odds.copy_(torch.as_tensor(odds, dtype=torch.float64))

    def health(self) -> SamplerHealth:
        """Its processes, and how long the least recently active rollout worker has been silent."""
        beats = [b for b in self.heartbeats[:, BEAT_TIME].tolist() if b > 0]
        silent = time.time() - min(beats) if beats and self.started and self.processes else 0.0
        return SamplerHealth(len(self.processes), sum(p.is_alive() for p in self.processes), max(0.0, silent))

    def release_round(self) -> None:
        """Synchronous mode: lets the workers start their next rollout."""
        self.sync_round[0] += 1
