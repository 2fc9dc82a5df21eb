"""hardware.inference=server: batched inference processes serve the rollout workers through
shared channels. The server answers exactly what the policy acting in a worker would (same
weights, observations, RNN states and random draws); through the real sampler every recorded
step is the server's answer for that row; several policies act for their own rows; a
dead or failing server is a clear error; bad keys are refused before any process starts."""

from __future__ import annotations

import copy
import os
import pickle
import signal
import time

import numpy as np
import pytest
import torch

from sf_hydra.config import validate
from sf_hydra.core.errors import ConfigError
from sf_hydra.models.actor_critic import act_per_policy
from sf_hydra.sampler.inference_server import decode_rows, encode_rows
from sf_hydra.sampler.policy_store import DEVICE
from sf_hydra.sampler.sampler import SamplerError
from tests.helpers.servers import GRU, SERVER, server_and_channel
from tests.sampler.collect import collect, running_sampler


@pytest.mark.parametrize("model", ["mlp", "gru"])
def test_server_answers_as_the_policy_in_a_worker_would(tmp_cfg, model):
    cfg = tmp_cfg(*SERVER, *(GRU if model == "gru" else ()))
    server, channel, (policy,) = server_and_channel(cfg, rows=8)
    torch.manual_seed(7)
    server.serve([(0, (0, 3)), (0, (3, 8))])  # two splits' requests, one forward
    torch.manual_seed(7)
    rnn = channel.rnn.clone() if policy.core is not None else None
    expected = policy.act({k: v.clone() for k, v in channel.obs.items()}, rnn)
    assert torch.equal(channel.out["actions"], expected.actions)
    assert torch.equal(channel.out["log_probs"], expected.log_probs)
    assert torch.equal(channel.out["values"], expected.values)
    assert torch.equal(channel.out["policy_versions"], torch.zeros(8, dtype=torch.int64))
    if policy.core is not None:
        assert torch.equal(channel.next_rnn, expected.rnn_states)
        assert not torch.equal(channel.next_rnn, channel.rnn)
    assert [channel.next_answer() for _ in range(2)] == [(0, 3), (3, 8)]  # one answer per request
    assert not channel.answer_ready(0)


def test_each_row_acts_with_its_own_policy_and_version(tmp_cfg):
    cfg = tmp_cfg(*SERVER, "algo.num_policies=2")
    server, channel, models = server_and_channel(cfg, rows=6, policies=2)
    server.stores[1].publish(models[1], version=5)
    ids = np.array([1, 0, 1, 1, 0, 0])
    channel.policies.copy_(torch.from_numpy(ids))
    torch.manual_seed(3)
    server.serve([(0, (0, 6))])
    # Row i is models[ids[i]]'s: its action and log-prob those models[ids[i]].act of all the rows draws
    # from the same random state (the server acts all rows in one fused forward, actor_critic.FusedPolicies).
    obs = {k: v.clone() for k, v in channel.obs.items()}
    own = []
    for m in models:
        torch.manual_seed(3)
        own.append(m.act(obs, None))
    rows = torch.arange(6)
    pick = torch.from_numpy(ids)
    assert torch.equal(channel.out["actions"], torch.stack([o.actions for o in own])[pick, rows])
    assert torch.allclose(channel.out["log_probs"], torch.stack([o.log_probs for o in own])[pick, rows], atol=1e-6)
    expected = act_per_policy(models, obs, None, ids)
    assert torch.allclose(channel.out["values"], expected.values, atol=1e-6)
    assert channel.out["policy_versions"].tolist() == [5, 0, 5, 5, 0, 0]
    assert not torch.equal(models[0].act({k: v for k, v in channel.obs.items()}, None).values, expected.values)


def test_a_new_version_is_loaded_before_the_next_batch(tmp_cfg):
    cfg = tmp_cfg(*SERVER)
    server, channel, (policy,) = server_and_channel(cfg, rows=4)
    server.serve([(0, (0, 4))])
    before = channel.out["values"].clone()
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.5)
    server.stores[0].publish(policy, version=3)
    server.serve([(0, (0, 4))])
    assert channel.out["policy_versions"].tolist() == [3] * 4
    assert not torch.equal(channel.out["values"], before)
    assert torch.allclose(channel.out["values"], policy.act(dict(channel.obs), None).values)


def _replayed_log_probs(model, batch):
    """The log-probs the acting weights give the recorded actions, from each trajectory's first RNN state."""
    obs = {k[len("obs."):]: v for k, v in batch.items() if k.startswith("obs.")}
    rnn = batch["rnn_states"][:, 0] if "rnn_states" in batch else None
    with torch.no_grad():
        log_probs, _, values = model.evaluate(obs, batch["actions"], rnn, batch["dones"])
    return log_probs, values


@pytest.mark.parametrize("env", ["cartpole_gru", "toy", "batched"])
def test_every_recorded_step_is_the_servers_answer_for_its_row(tmp_cfg, env):
    """Through the real sampler (worker and server processes): with fixed weights, the recorded
    log-probs and values are what the model gives the recorded observations and actions, so
    each row got its own answer, for both worker kinds and a recurrent model."""
    extra = {"cartpole_gru": GRU, "toy": ("env=gym/multi_agent_toy", "env.kwargs.num_agents=2"),
             "batched": ("hardware.batched_sampling=true",)}[env]
    cfg = tmp_cfg(*SERVER, "hardware.inference_workers=2", *extra)
    got = collect(cfg, min_slots=40)
    recorded_rows = got.batch["log_probs"].shape[0]
    assert recorded_rows >= 40 and (got.batch["policy_versions"] == 0).all()
    log_probs, values = _replayed_log_probs(got.model.eval(), got.batch)
    assert torch.allclose(log_probs, got.batch["log_probs"], atol=1e-5)
    assert torch.allclose(values, got.batch["values"][:, :-1], atol=1e-5)


def test_a_killed_server_stops_the_run_with_its_name(tmp_cfg):
    cfg = tmp_cfg(*SERVER)
    with running_sampler(cfg) as sampler:
        server = next(p for p in sampler.processes if p.name == "inference-server-0")
        assert sampler.poll(10.0) is not None  # it serves
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 15.0
        with pytest.raises(SamplerError, match=r"inference-server-0 \(pid \d+\) died with exit code -9"):
            while time.monotonic() < deadline:
                traj = sampler.poll(0.5)
                if traj is not None:
                    sampler.free(traj.slots)


def test_a_server_that_raises_stops_the_run_with_its_traceback(tmp_cfg):
    cfg = tmp_cfg(*SERVER, "model._target_=tests.helpers.recording_models.FailingToActActorCritic")
    with pytest.raises(SamplerError, match=r"(?s)inference server 0 .*failed.*the policy cannot act"):
        with running_sampler(cfg) as sampler:  # (the workers' first requests may fail it during start-up)
            deadline = time.monotonic() + 30.0
            while time.monotonic() < deadline:
                sampler.poll(0.5)


@pytest.mark.parametrize("overrides, key", [
    (("hardware.inference=server", "hardware.serial_mode=true"), "hardware.inference"),
    (("hardware.inference=server", "hardware.num_workers=2", "hardware.inference_workers=3"),
     "hardware.inference_workers"),
    (("hardware.inference_workers=2",), "hardware.inference_workers"),
    (("hardware.inference_device=cuda",), "hardware.inference_device"),
])
def test_bad_inference_keys_are_refused_naming_the_key(tmp_cfg, overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate(tmp_cfg(*overrides))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_a_cuda_server_without_cuda_is_refused(tmp_cfg):
    with pytest.raises(ConfigError, match=r"hardware\.inference_device.*no CUDA device"):
        validate(tmp_cfg("hardware.inference=server", "hardware.inference_device=cuda"))


@pytest.mark.gpu
def test_a_cuda_server_answers_as_the_cpu_policy(tmp_cfg):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    cfg = tmp_cfg(*SERVER, *GRU, "hardware.inference_device=cuda")
    server, channel, (policy,) = server_and_channel(cfg, rows=8)
    server.serve([(0, (0, 8))])
    replay, _, values = policy.evaluate({k: v.unsqueeze(1) for k, v in channel.obs.items()},
                                     channel.out["actions"].unsqueeze(1), channel.rnn, torch.zeros(8, 1))
    assert torch.allclose(channel.out["log_probs"], replay[:, 0], atol=1e-4)
    assert torch.allclose(channel.out["values"], values[:, 0], atol=1e-4)


def test_a_request_crosses_the_pipe_as_a_few_raw_bytes(tmp_cfg):
    assert encode_rows((3, 8)) == np.array([3, 8], dtype=np.int32).tobytes()
    assert decode_rows(encode_rows((3, 8))) == (3, 8)
    assert decode_rows(encode_rows([0, 5, 7])) == [0, 5, 7]  # a bootstrap over some rows
    assert decode_rows(encode_rows([])) == []
    _, channel, _ = server_and_channel(tmp_cfg(*SERVER), rows=8)
    channel.request((0, 4))
    channel.request([1, 6])
    assert channel.waiting_requests() == [(0, 4), [1, 6]] and channel.waiting_requests() == []
    channel.answer([1, 6])
    assert channel.answer_ready(1.0) and channel.next_answer() == [1, 6] and not channel.answer_ready(0)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_weights_published_on_the_learners_device_reach_the_server_device_to_device(tmp_cfg, device):
    """Server processes get the learner's device tensor by message; from then on each version goes
    there, not to host memory. The host copy keeps version 0, so answers that follow version 1's
    weights came through the device tensor. (On the CPU, a shared tensor stands in for the device:
    the same messages and seqlock, no CUDA IPC.)"""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    cfg = tmp_cfg(*SERVER, *GRU, "hardware.inference_workers=2", f"hardware.inference_device={device}")
    with running_sampler(cfg) as sampler:
        store, learner = sampler.stores[0], copy.deepcopy(sampler.model).to(device)
        with torch.no_grad():
            for p in learner.parameters():
                p.add_(0.3 * torch.randn_like(p))
        if device == "cpu":  # a CUDA learner's model makes publish share the tensor by itself
            sampler.share_store_on_device(0, torch.device("cpu"))
        host_before = store.flat.clone()
        sampler.publish(0, learner, version=1)
        assert int(store.location[0]) == DEVICE and torch.equal(store.flat, host_before)
        parts, deadline = [], time.monotonic() + 60.0
        while sum(len(p["log_probs"]) for p in parts) < 16:
            assert time.monotonic() < deadline, "no trajectory acted with version 1 within 60 s"
            traj = sampler.poll(0.5)
            if traj is not None:
                batch = sampler.buffers.gather(torch.tensor(traj.slots))
                sampler.free(traj.slots)
                keep = (batch["policy_versions"] == 1).all(dim=1)  # rollouts acted by version 1 alone
                parts.append({k: v[keep] for k, v in batch.items()})
        batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    log_probs, _ = _replayed_log_probs(learner.cpu().eval(), batch)
    stale, _ = _replayed_log_probs(sampler.model.eval(), batch)
    # A CUDA server's kernels (cuDNN's TF32 convolutions among them) round differently from the
    # CPU replay: measured on an H200, up to 6.0e-4 apart; stale weights were 0.51 off.
    atol = 1e-4 if device == "cpu" else 2e-3
    off, stale_off = ((x - batch["log_probs"]).abs().max().item() for x in (log_probs, stale))
    print(f"{device}: replayed with version 1 within {off:.2e}, with version 0 {stale_off:.2e} off")
    assert off <= atol and stale_off > 10 * atol


def test_a_reader_without_the_device_tensor_refuses_to_read_stale_host_weights(tmp_cfg):
    cfg = tmp_cfg(*SERVER)
    server, channel, (policy,) = server_and_channel(cfg, rows=4)
    store = server.stores[0]
    store.share_on_device(torch.device("cpu"))
    store.publish(policy, version=2)
    reader = pickle.loads(pickle.dumps(store))  # what a process gets at launch: no device tensor
    assert reader.needs_device_flat() and reader.current_version() == 2
    with pytest.raises(RuntimeError, match="publishes this policy's weights on its device"):
        reader.load_into(copy.deepcopy(policy))
    server.stores[0], server.control_wait = reader, 0.2
    with pytest.raises(RuntimeError, match="its message with that tensor did not come within 0 s"):
        server.sync_weights()
