"""Exported policies (sf_hydra.evaluation.export, `sf-export`): the ONNX file run by onnxruntime and the
TorchScript file run by torch.jit give what Policy.act and the network give, on 1,000 observations, for the
CartPole MLP, the Doom conv + GRU network (its state carried over 20 steps) and a MuJoCo Gaussian policy.

Tolerance: the most likely discrete action exactly; every float output (distribution parameters, a continuous
action, the value, the next state) within 1e-4 absolute and relative (float32, another runtime's kernels)."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.core.spaces import obs_specs
from sf_hydra.evaluation.export import export
from sf_hydra.evaluation.policy import Policy
from sf_hydra.models import build_model, model_recipe
from tests.conftest import make_cfg
from tests.faults.runs import env_with_repo

REPO = Path(__file__).resolve().parents[2]
TOL = {"atol": 1e-4, "rtol": 1e-4}
# (overrides, observation space, action space): the spaces the families give these envs
NETWORKS = {
    "cartpole_mlp": ((), gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)),
    "doom_conv_gru": (("env=doom/basic",), gym.spaces.Box(0, 255, (3, 72, 128), np.uint8), gym.spaces.Discrete(3)),
    "mujoco_gaussian": (("env=mujoco/halfcheetah",), gym.spaces.Box(-np.inf, np.inf, (17,), np.float64),
                        gym.spaces.Box(-1.0, 1.0, (6,), np.float32)),
}


def _policy(tmp_path, name: str) -> Policy:
    overrides, obs_space, action_space = NETWORKS[name]
    torch.manual_seed(0)
    model = build_model(model_recipe(make_cfg(tmp_path, *overrides)), obs_space, action_space)
    for buffer in model.buffers():  # a trained normalizer's statistics, not its initial ones
        if buffer.is_floating_point():
            buffer.add_(torch.rand_like(buffer))
    return Policy(model, obs_space, action_space)


def _observations(space: gym.Space, n: int) -> np.ndarray:
    """Observations in the dtype the exported file takes (the trajectory buffers': the JSON's)."""
    dtype = torch.empty((), dtype=obs_specs(space)["obs"][1]).numpy().dtype
    rng = np.random.default_rng(0)
    if dtype == np.uint8:
        return rng.integers(0, 256, (n, *space.shape), dtype=np.uint8)
    return rng.normal(0, 1, (n, *space.shape)).astype(dtype)


def _expected(policy: Policy, obs: np.ndarray, state):
    """(params, most likely action as Policy.act takes it, value, next state) from the network."""
    with torch.no_grad():
        dist, value, next_state = policy.model.forward_step({"obs": torch.as_tensor(obs)}, state)
    action, _ = policy.act(obs, state, deterministic=True)
    return dist.params().numpy(), np.asarray(action), value.numpy(), next_state


def _runner(fmt: str, path: Path, names):
    if fmt == "onnx":
        ort = pytest.importorskip("onnxruntime", reason="format=onnx needs the export extra (onnxruntime)")
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return lambda *arrays: session.run(None, dict(zip(names, [np.asarray(a) for a in arrays])))
    module = torch.jit.load(str(path))
    return lambda *arrays: [t.numpy() for t in module(*[torch.as_tensor(np.asarray(a)) for a in arrays])]


def _compare(got, expected, discrete: bool):
    params, action, value = got[:3]
    np.testing.assert_allclose(params, expected[0], **TOL)
    if discrete:
        assert np.array_equal(action, expected[1])
    else:
        np.testing.assert_allclose(action, expected[1], **TOL)
    np.testing.assert_allclose(value, expected[2], **TOL)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("name", list(NETWORKS))
def test_the_exported_file_acts_as_the_policy_on_1000_observations(tmp_path, name, fmt):
    if fmt == "onnx":
        pytest.importorskip("onnxscript", reason="format=onnx needs the export extra (onnxscript)")
    policy = _policy(tmp_path, name)
    path, described = export(policy, fmt, tmp_path / f"{name}.{'onnx' if fmt == 'onnx' else 'pt'}")
    info = json.loads(described.read_text())
    names = [i["name"] for i in info["inputs"]]
    run = _runner(fmt, path, names)
    discrete = isinstance(policy.action_space, gym.spaces.Discrete)
    obs = _observations(policy.observation_space, 1000)
    if not policy.recurrent:
        _compare(run(obs), _expected(policy, obs, None), discrete)
        return
    # 50 envs x 20 steps, the state carried over by both sides
    assert names[-1] == "rnn_state" and info["rnn_state_size"] == policy.model.rnn_state_size
    state = np.zeros((50, policy.model.rnn_state_size), np.float32)
    theirs = torch.zeros(50, policy.model.rnn_state_size)
    for step in obs.reshape(20, 50, *obs.shape[1:]):
        got = run(step, state)
        expected = _expected(policy, step, theirs)
        _compare(got, expected, discrete)
        np.testing.assert_allclose(got[3], expected[3].numpy(), **TOL)
        state, theirs = got[3], expected[3]


@pytest.mark.slow
def test_sf_export_writes_a_file_and_says_how_to_call_it(tmp_path):
    pytest.importorskip("onnxruntime", reason="format=onnx needs the export extra (onnxruntime)")
    train(make_cfg(tmp_path, "hardware.num_workers=1", "hardware.num_envs_per_worker=2", "train_for_env_steps=2000"))
    out = subprocess.run([sys.executable, "-m", "sf_hydra.app.export_command", "experiment=test",
                          f"train_dir={tmp_path}", "format=onnx"],
                         capture_output=True, text=True, env=env_with_repo(), cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    path = tmp_path / "test" / "export" / "policy_0.onnx"
    info = json.loads((path.parent / "policy_0.onnx.json").read_text())
    assert info["source"]["checkpoint"].endswith("last.ckpt") and info["source"]["env_steps"] >= 2000
    assert [i["name"] for i in info["inputs"]] == ["obs"] and info["outputs"][:2] == ["action_dist_params", "action"]
    assert "onnxruntime.InferenceSession" in info["how_to_call"]
    # the exporter's own chatter (onnxscript's and onnx_ir's passes, torch's registry) is not said: sf_hydra's line is
    said = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert said and all("[sf_hydra]" in line for line in said), said
    policy = Policy.load(tmp_path / "test")
    obs = _observations(policy.observation_space, 1000)
    _compare(_runner("onnx", path, ["obs"])(obs), _expected(policy, obs, None), discrete=True)


@pytest.mark.slow
def test_each_format_keeps_its_own_description_with_its_files_checksum(tmp_path):
    """An ONNX export, then a TorchScript one of the same policy: each file has its own description, named after
    it, naming it and holding its sha256; the ONNX file still runs in onnxruntime as its description says."""
    pytest.importorskip("onnxscript", reason="format=onnx needs the export extra (onnxscript)")
    policy = _policy(tmp_path, "cartpole_mlp")
    folder = tmp_path / "export"
    export(policy, "onnx", folder / "policy_0.onnx")
    export(policy, "torchscript", folder / "policy_0.pt")
    assert sorted(p.name for p in folder.iterdir()) == ["policy_0.onnx", "policy_0.onnx.json", "policy_0.pt",
                                                         "policy_0.pt.json"]
    for name, fmt in (("policy_0.onnx", "onnx"), ("policy_0.pt", "torchscript")):
        info = json.loads((folder / f"{name}.json").read_text())
        assert (info["file"], info["format"]) == (name, fmt)
        assert info["sha256"] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    info = json.loads((folder / "policy_0.onnx.json").read_text())
    obs = _observations(policy.observation_space, 1000)
    run = _runner("onnx", folder / info["file"], [i["name"] for i in info["inputs"]])
    _compare(run(obs), _expected(policy, obs, None), discrete=True)


@pytest.mark.parametrize("args, key", [
    (["experiment=x", "format=tflite"], "format='tflite'"),
    (["experiment=x", "format=onnx", "kind=newest"], "kind='newest'"),
    (["experiment=x", "format=onnx", "policy=first"], "policy='first'"),
    (["format=onnx"], "experiment=None"),
    (["experiment=x", "format=onnx", "colour=blue"], "colour='blue'"),
    (["experiment=no_such_run", "format=torchscript"], "experiment='no_such_run'"),
])
def test_bad_arguments_are_named_with_exit_status_2(tmp_path, args, key):
    out = subprocess.run([sys.executable, "-m", "sf_hydra.app.export_command", *args, f"train_dir={tmp_path}"],
                         capture_output=True, text=True, env=env_with_repo(), cwd=REPO, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"bad config: {key} is not allowed" in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
