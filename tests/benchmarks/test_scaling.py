"""benchmarks/scaling.py and its job helpers (benchmarks/_scaling_job/): a process is pinned to its host's core, the
collective probe counts a data-parallel learner's collectives with their real sizes, the figures and the estimate
come out as worked by hand, and the GPU checks refuse cleanly without CUDA."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

BENCH = REPO_ROOT / "benchmarks"
JOB_PATH = BENCH / "_scaling_job"
sys.path.insert(0, str(BENCH))
from scaling import fit_latency_bandwidth, hierarchical_allreduce, link_seconds, probe_figures  # noqa: E402

AFFINITY = "import os; print(sorted(os.sched_getaffinity(0)))"


def _cores_of_child(pin):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(JOB_PATH), str(REPO_ROOT / "src")])}
    env.pop("SF_BENCH_PIN", None)
    if pin is not None:
        env["SF_BENCH_PIN"] = pin
    out = subprocess.run([sys.executable, "-c", AFFINITY], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_a_job_process_is_pinned_to_the_core_of_its_host():
    mine = sorted(os.sched_getaffinity(0))
    core = mine[-1]
    host = socket.gethostname()
    assert _cores_of_child(f"elsewhere:{mine[0]},{host}:{core}") == [core]
    assert _cores_of_child(f"elsewhere:{core}") == mine  # a host not in the map is left alone
    assert _cores_of_child(None) == mine  # without the variable nothing happens


def _step(cycle, step, collectives):
    return {"step_s": step, "cycle_s": cycle, "collectives": collectives}


def test_probe_figures_are_rank_zeros_medians_after_start_up():
    warmup = [_step(9.0, 9.0, {"all_reduce 100 B": [1, 100, 5.0]})] * 3  # left out
    steps = [_step(0.10, 0.08, {"all_reduce 100 B": [2, 200, 0.02], "all_gather_object": [1, 50, 0.01]}),
             _step(0.20, 0.12, {"all_reduce 100 B": [2, 200, 0.04], "all_gather_object": [1, 70, 0.01]}),
             _step(0.30, 0.10, {"all_reduce 100 B": [2, 200, 0.06], "all_gather_object": [1, 60, 0.03]})]
    rank0 = {"rank": 0, "hostname": "sfn1", "cores": [0], "children": [{"cores": [0]}], "trainable_numbers": 25,
             "steps": warmup + steps}
    rank1 = {**rank0, "rank": 1, "hostname": "sfn2", "cores": [1], "children": [{"cores": [1]}], "steps": []}
    figures = probe_figures([rank1, rank0])
    assert figures["step_ms"] == pytest.approx(100.0) and figures["cycle_ms"] == pytest.approx(200.0)
    assert figures["coll_ms"] == pytest.approx(50.0)  # the medians of 30, 50, 90 ms
    assert figures["coll_share"] == pytest.approx(0.3)  # of 0.3, 0.25, 0.3
    assert figures["kinds"]["all_reduce 100 B"] == {"calls": 2, "bytes": 200, "ms": pytest.approx(40.0)}
    assert figures["kinds"]["all_gather_object"]["bytes"] == 60
    assert figures["placement"] == ["sfn1:[0]/[0]", "sfn2:[1]/[1]"] and figures["learner_steps"] == 6


def test_latency_and_bandwidth_fit_and_the_ring_cost():
    times = {1: 1e-3, 1000: 1e-3, 16384: 1.2e-3, 2**18: 1e-3 + 2**20 / 1e8, 2**20: 1e-3 + 2**22 / 1e8,
             2**22: 0.5}  # the last size disturbed
    latency, bandwidth = fit_latency_bandwidth(times)
    assert latency == pytest.approx(1e-3) and bandwidth == pytest.approx(1e8)
    measured = {1: 1e-3, 1000: 3e-3, 2000: 5e-3}  # float32 numbers -> seconds
    assert link_seconds(2, measured) == 1e-3  # below the smallest size (4 bytes)
    assert link_seconds(6000, measured) == pytest.approx(4e-3)  # between 4,000 and 8,000 bytes
    assert link_seconds(12000, measured) == pytest.approx(7e-3)  # the last slope, extended
    # 8 x 8, 8 MB: NVLink 2*7*8us + 2*7/8*8e6/150e9; IB over 1 MB shards: 2*7*20us + 2*7/8*1e6/20e9
    expected = 14 * 8e-6 + 1.75 * 8e6 / 150e9 + 14 * 20e-6 + 1.75 * 1e6 / 20e9
    assert hierarchical_allreduce(8e6) == pytest.approx(expected)


@pytest.mark.slow  # ~40 s: two local learner ranks train briefly
def test_probe_counts_the_gradient_buckets_of_each_minibatch_and_their_exposed_wait(tmp_path):
    probe = tmp_path / "probe"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(JOB_PATH)])}
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), f"train_dir={tmp_path}", "experiment=run",
           "hardware.devices=2", "hardware.num_workers=1", "hardware.num_envs_per_worker=4", "algo.rollout=16",
           "algo.batch_size=64", "algo.num_batches_per_epoch=2", "algo.num_epochs=2", "train_for_env_steps=3000",
           "+callbacks.collective_probe._target_=collective_probe.CollectiveProbe",
           f"+callbacks.collective_probe.directory={probe}"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for r in (0, 1):
        record = json.loads((probe / f"collectives_rank_{r}.json").read_text())
        assert record["world_size"] == 2 and record["rank"] == r and len(record["steps"]) >= 3
        numbers = record["trainable_numbers"]
        # The gradients travel as one float32 bucket per minibatch (2 epochs x 2 minibatches; the model is
        # smaller than a bucket), the loss scalars appended: one all_reduce key a little larger than the model's
        # gradients, called 4 times a step, asynchronously while the backward pass runs; what each backward pass
        # waited for them after its computation is the exposed kind, one per minibatch.
        for step in record["steps"]:
            grads = {k: v for k, v in step["collectives"].items()
                     if k.startswith("all_reduce async") and 4 * numbers <= v[1] / v[0] <= 4 * numbers + 64}
            assert [v[0] for v in grads.values()] == [4], step
            assert step["collectives"]["gradient buckets (exposed)"][0] == 4, step
            assert all(v[2] >= 0 for v in step["collectives"].values())
            assert step["step_s"] > 0


def test_gpu_checks_refuse_cleanly_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine: the checks run instead of refusing")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    out = subprocess.run([sys.executable, str(BENCH / "gpu_collectives.py")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "needs a CUDA device" in out.stderr, out.stderr
    if shutil.which("nvidia-smi") is None:
        out = subprocess.run(["bash", str(BENCH / "gpu_check.sh")], cwd=REPO_ROOT, env={**env, "OUT": "/nonexistent"},
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "needs an NVIDIA GPU" in out.stderr, out.stderr
        assert not Path("/nonexistent").exists()
