"""Batched inference for the rollout workers (hardware.inference=server).

Each rollout worker shares an `InferenceChannel` with one server process: its rows'
observations, RNN states and acting policy ids (written by the worker, read by the server)
and the policy step's outputs (written by the server into the same rows). A pipe per worker
carries only the rows of a request, a few raw int32 bytes, and the same bytes back as the
answer; the data stays in shared memory. (Queues did this before: a lock, a feeder thread and
a dill pickle per message, about 5k messages/s at 20k FPS.) A server waits on all its workers'
pipes at once, takes every request waiting, acts once per policy on all their rows together,
and answers each worker. It re-reads a policy's weights from its `PolicyStore` when the version
changes, as in-worker copies do, and records per row the version that acted. With the learner
and the server on one CUDA device the weights go device to device: the learner sends the server
a tensor on its device (by IPC handle, through the server's control pipe) and publishes there.

A worker submits a split's next request as soon as that split's envs have stepped, then
steps its other split while the server computes: with worker_num_splits=2 one half of the
envs steps while the other waits for actions (double buffering).

This module must not import lightning: it is loaded in every server process.
"""

from __future__ import annotations

import logging
import signal
import time
import traceback
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from multiprocess.connection import wait

from sf_hydra.core.seeding import INFERENCE_SERVER, seed_process
from sf_hydra.core.spaces import obs_specs
from sf_hydra.core.trajectory import TrajectorySpec
from sf_hydra.models.actor_critic import StepOutput, acting_copy, build_model, policies_act
from sf_hydra.sampler import mp
from sf_hydra.sampler.graphed_act import BucketedAct, record_cuda_graph
from sf_hydra.sampler.messages import ServerFailed
from sf_hydra.sampler.settings import WorkerSettings

log = logging.getLogger(__name__)

Rows = Union[slice, np.ndarray]

# Trajectory fields a policy step does not fill (the env step's, the worker's own records).
NOT_POLICY_OUTPUTS = ("rewards", "dones", "time_outs", "policy_ids", "rnn_states")


def policy_output_fields(spec: TrajectorySpec) -> List:
    """The fields one policy step fills, as the spec declares them: the action, its log-prob, the
    value, the acting version, and any extras the model records (action_dist_params, its own)."""
    return [f for f in spec if not f.name.startswith("obs.") and f.name not in NOT_POLICY_OUTPUTS]


def encode_rows(rows) -> bytes:
    """A request's rows as pipe bytes: a split (start, stop) as two int32, an index list as -1 then
    the indices."""
    if isinstance(rows, tuple):
        return np.array(rows, dtype=np.int32).tobytes()
    return np.array([-1, *rows], dtype=np.int32).tobytes()


def decode_rows(data: bytes):
    """`encode_rows`'s inverse: (start, stop) or a list of row indices."""
    values = np.frombuffer(data, dtype=np.int32)
    return (int(values[0]), int(values[1])) if values[0] >= 0 else values[1:].tolist()


class InferenceChannel:
    """What one rollout worker and its server share, allocated once for the worker's `rows`.
    Invariant: between a request for some rows and its answer the worker does not touch those
    rows' `obs`, `rnn` or `policies`, and the server writes only those rows of `out`.
    `link`: the two ends of a duplex pipe (the worker's, the server's); requests go one way,
    answers the other."""

    def __init__(self, worker_id: int, server_id: int, rows: int, obs_space, spec: TrajectorySpec,
                 rnn_state_size: int, link):
        self.worker_id, self.server_id = worker_id, server_id
        self.obs = {k: torch.zeros((rows, *shape), dtype=dtype).share_memory_()
                    for k, (shape, dtype) in obs_specs(obs_space).items()}
        self.rnn = torch.zeros(rows, rnn_state_size).share_memory_()
        self.policies = torch.zeros(rows, dtype=torch.int64).share_memory_()
        self.out = {f.name: torch.zeros((rows, *f.shape), dtype=f.dtype).share_memory_()
                    for f in policy_output_fields(spec)}
        self.next_rnn = torch.zeros(rows, rnn_state_size).share_memory_()
        self.worker_end, self.server_end = link

    # the worker's side
    def request(self, rows) -> None:
        self.worker_end.send_bytes(encode_rows(rows))

    def answer_ready(self, timeout: float) -> bool:
        return self.worker_end.poll(timeout)

    def next_answer(self):
        return decode_rows(self.worker_end.recv_bytes())

    # the server's side
    def answer(self, rows) -> None:
        self.server_end.send_bytes(encode_rows(rows))

    def waiting_requests(self) -> list:
        """Every request this worker has sent that the server has not read yet."""
        got = []
        while self.server_end.poll(0):
            got.append(decode_rows(self.server_end.recv_bytes()))
        return got

    def output(self, rows: Rows, recurrent: bool) -> Tuple[StepOutput, torch.Tensor]:
        """The answer for `rows` (views of the shared outputs) and each row's acting version."""
        index = rows if isinstance(rows, slice) else torch.from_numpy(rows)
        out = {name: t[index] for name, t in self.out.items()}
        versions = out.pop("policy_versions")
        core = {k: out.pop(k) for k in ("actions", "log_probs", "values")}
        step = StepOutput(**core, rnn_states=self.next_rnn[index] if recurrent else None, extras=out or None)
        return step, versions


class InferenceClient:
    """A rollout worker's side: `submit` rows (their observations and RNN states are already in the
    channel), `act` waits for the answer. Requests are keyed by the rows' slice (a worker's splits);
    an answer stays valid for its rows until they step again and are submitted anew."""

    def __init__(self, channel: InferenceChannel, recurrent: bool, alive_check, server_wait_limit: float):
        self.channel, self.recurrent = channel, recurrent
        self.check_alive, self.wait_limit = alive_check, server_wait_limit
        self.pending: Dict[Tuple[int, int], np.ndarray] = {}  # rows -> the policy ids they were asked with
        self.answered: Dict[Tuple[int, int], np.ndarray] = {}

    @staticmethod
    def key(rows: Rows) -> Tuple[int, int]:
        return (rows.start, rows.stop) if isinstance(rows, slice) else (-1, -1)

    def submit(self, rows: slice, policies: Optional[np.ndarray]) -> None:
        key = self.key(rows)
        self.answered.pop(key, None)
        if policies is not None:
            self.channel.policies[rows] = torch.from_numpy(policies)
        self.pending[key] = policies
        self.channel.request(key)

    def act(self, rows: Rows, policies: Optional[np.ndarray]):
        """The policy step for `rows`: a pending or still valid answer when there is one, else a new
        request. An index array (a bootstrap over some rows) is answered from the valid answers of
        the splits that hold them, asking for the rest first. Returns (output, versions, policies)."""
        key = self.key(rows)
        if key == (-1, -1):
            return self._act_on_index(rows, policies)
        if key not in self.pending and key not in self.answered:
            self.submit(rows, policies)
        self._wait_for(key)
        step, versions = self.channel.output(rows, self.recurrent)
        return step, versions, self.answered[key]

    def _act_on_index(self, rows: np.ndarray, policies: Optional[np.ndarray]):
        for key in list(self.pending):
            self._wait_for(key)
        covered = np.zeros(len(self.channel.policies), dtype=bool)
        for start, stop in self.answered:
            covered[start:stop] = True
        if not covered[rows].all():  # rows that no split's answer holds: ask for exactly them
            self.answered.clear()
            if policies is not None:
                self.channel.policies[torch.from_numpy(rows)] = torch.from_numpy(policies)
            self.pending[(-1, -1)] = policies
            self.channel.request(rows.tolist())
            self._wait_for((-1, -1))
            self.answered.pop((-1, -1))
        step, versions = self.channel.output(rows, self.recurrent)
        return step, versions, policies

    def drop_answers(self) -> None:
        """Waits out any request in flight and forgets every answer (new weights must act next)."""
        for key in list(self.pending):
            self._wait_for(key)
        self.answered.clear()

    def _wait_for(self, key) -> None:
        if key not in self.pending:
            return
        deadline = time.monotonic() + self.wait_limit
        while key in self.pending:
            if not self.channel.answer_ready(0.5):
                self.check_alive()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"inference server {self.channel.server_id} did not answer rollout worker "
                                       f"{self.channel.worker_id} for {self.wait_limit:.0f} s "
                                       "(hardware.worker_stall_timeout_sec)") from None
                continue
            got = self.channel.next_answer()
            done = got if isinstance(got, tuple) else (-1, -1)  # a split's (start, stop), else an index list
            self.answered[done] = self.pending.pop(done)


class InferenceServer:
    """One server: a model per policy store, the channels of the workers it serves."""

    def __init__(self, settings: WorkerSettings, obs_space, action_space, stores,
                 channels: Dict[int, InferenceChannel], control=None, control_wait: float = 60.0):
        """settings: the run plan's (its model recipe, device and precision); control: the receiving end
        of the learner's pipe to this server (messages.DeviceWeights)."""
        self.stores, self.channels, self.control = stores, channels, control
        self.control_wait = control_wait
        acting = settings.acting
        self.device = torch.device(acting.inference_device)
        self.models = [acting_copy(build_model(acting.model, obs_space, action_space).to(self.device), acting.bf16)
                       for _ in stores]
        self.policies_act = policies_act(self.models)  # before the first load: views into stacked weights
        if acting.inference_cuda_graphs and self.device.type == "cuda":
            rows = sum(len(ch.policies) for ch in channels.values())  # the most rows one batch can hold
            self.policies_act = BucketedAct(self.policies_act, rows, capture=record_cuda_graph)
        self.versions = np.full(len(stores), -1, dtype=np.int64)
        self.sync_weights()
        self.recurrent = self.models[0].core is not None
        self.single_policy = len(stores) == 1
        # no cast cache: a recorded step must cast the weights itself on every replay (they change in place)
        self.autocast = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=acting.bf16,
                                       cache_enabled=False)
        self.batches, self.rows_served = 0, 0

    def sync_weights(self) -> None:
        """Loads each policy whose version changed: from host memory, or device to device from the
        learner's tensor once the learner publishes there (its message comes before that version)."""
        for p, store in enumerate(self.stores):
            if store.current_version() != self.versions[p]:
                if store.needs_device_flat():
                    self._read_control(until=store)
                self.versions[p] = store.load_into(self.models[p])

    def _read_control(self, until) -> None:
        """Takes the learner's DeviceWeights messages; waits (up to control_wait s) until `until` has its
        device tensor: the learner sent it before it published there."""
        deadline = time.monotonic() + self.control_wait
        while until.needs_device_flat():
            if self.control is None or not self.control.poll(max(0.0, deadline - time.monotonic())):
                raise RuntimeError("the learner publishes weights on its device, and its message with that "
                                   f"tensor did not come within {self.control_wait:.0f} s")
            msg = self.control.recv()
            self.stores[msg.policy].adopt_device_flat(msg.flat)

    def serve(self, requests: List[Tuple[int, object]]) -> None:
        """Acts once per policy present on the rows of all `requests`; writes the outputs into each
        worker's channel and answers it."""
        self.sync_weights()
        parts = [(self.channels[w], slice(*rows) if isinstance(rows, tuple) else torch.tensor(rows))
                 for w, rows in requests]
        obs = {k: torch.cat([ch.obs[k][r] for ch, r in parts]) for k in parts[0][0].obs}
        rnn = torch.cat([ch.rnn[r] for ch, r in parts]) if self.recurrent else None
        policies = None if self.single_policy else torch.cat([ch.policies[r] for ch, r in parts]).numpy()
        with torch.no_grad(), self.autocast:
            out = self._act(obs, rnn, policies)
        versions = (torch.full((len(out.actions),), int(self.versions[0]), dtype=torch.int64) if policies is None
                    else torch.from_numpy(self.versions[policies]))
        fields = {"actions": out.actions, "log_probs": out.log_probs, "values": out.values,
                  "policy_versions": versions, **(out.extras or {})}
        start = 0
        for (ch, r), (w, rows) in zip(parts, requests):
            n = (r.stop - r.start) if isinstance(r, slice) else len(r)
            for name, t in fields.items():
                ch.out[name][r] = t[start:start + n].to(ch.out[name].dtype)
            if out.rnn_states is not None:
                ch.next_rnn[r] = out.rnn_states[start:start + n].float()
            start += n
            ch.answer(rows)
        self.batches, self.rows_served = self.batches + 1, self.rows_served + start

    def _act(self, obs, rnn, policies) -> StepOutput:
        if self.device.type != "cpu":
            obs = {k: v.to(self.device, non_blocking=True) for k, v in obs.items()}
            rnn = None if rnn is None else rnn.to(self.device, non_blocking=True)
        out = self.policies_act(obs, rnn, policies)
        if self.device.type != "cpu":
            out = StepOutput(*(None if t is None else t.cpu() for t in out[:4]),
                             {k: v.cpu() for k, v in out.extras.items()} if out.extras else None)
        return out


def server_process_main(server_id: int, settings: WorkerSettings, obs_space, action_space, stores,
                        channels: Dict[int, InferenceChannel], control, out_queue, stop_flag, parent_pid: int,
                        parent_state: Optional[dict] = None) -> None:
    """Entry point of an inference server process. Ctrl+C and SIGTERM are the learner's to handle: it stops us.
    control: the receiving end of the learner's pipe to this server (messages.DeviceWeights).
    parent_state: the learner's environment, folder and import path (mp.parent_state), taken over first."""
    for stop in mp.STOPPED_BY_THE_LEARNER:
        signal.signal(stop, signal.SIG_IGN)
    if parent_state is not None:
        mp.adopt(parent_state)
    parent = mp.ParentWatch(parent_pid)
    torch.set_num_threads(settings.process.torch_threads)
    seed_process(settings.seed, INFERENCE_SERVER, server_id)
    try:
        server = InferenceServer(settings, obs_space, action_space, stores, channels, control)
        by_end = {ch.server_end: (w, ch) for w, ch in channels.items()}
        while not bool(stop_flag[0]) and parent.alive():
            batch = []  # every request waiting on any worker's pipe joins this batch
            for end in wait(list(by_end), timeout=0.2):
                w, ch = by_end[end]
                batch += [(w, rows) for rows in ch.waiting_requests()]
            if batch:
                server.serve(batch)
    except BaseException:
        out_queue.put(ServerFailed(server_id, traceback.format_exc()))
    finally:
        mp.exit_without_teardown(out_queue)
