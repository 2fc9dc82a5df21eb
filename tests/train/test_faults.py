"""A crashed env, a hanging env and Ctrl+C: each ends with a clear message, a loadable
checkpoint and no process left behind."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.sampler.sampler import SamplerError
from tests.conftest import make_cfg
from tests.helpers.processes import sampler_processes

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_env_crash_names_the_worker_and_keeps_the_checkpoint(tmp_path):
    cfg = make_cfg(tmp_path, "env=gym/any", "env.id=tests.helpers.faulty_envs:CrashingCartPole-v0",
                   "+env.kwargs.crash_after=400", "train_for_env_steps=1000000", "hardware.max_env_restarts=0")
    with pytest.raises(SamplerError, match=r"rollout worker \d failed:(.|\n)*boom: the simulator crashed"):
        train(cfg)
    ckpt = torch.load(tmp_path / "test" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["sf_hydra"]["env_steps"] > 0
    time.sleep(0.5)
    assert not sampler_processes()


@pytest.mark.long  # kept out of CI's 30 minutes (see pyproject.toml); run with -m long
def test_hanging_env_is_reported_not_waited_on_forever(tmp_path):
    cfg = make_cfg(tmp_path, "env=gym/any", "env.id=tests.helpers.faulty_envs:HangingCartPole-v0",
                   "+env.kwargs.hang_after=400", "train_for_env_steps=1000000", "hardware.worker_stall_timeout_sec=3",
                   "hardware.max_env_restarts=0")
    start = time.monotonic()
    with pytest.raises(SamplerError, match=r"rollout worker \d made no progress for \d+ s .*stuck in env \d"):
        train(cfg)
    assert time.monotonic() - start < 60
    assert not sampler_processes()


@pytest.mark.slow
def test_ctrl_c_saves_a_loadable_checkpoint_and_leaves_no_orphans(tmp_path):
    cmd = [sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=sigint",
           "hardware.num_envs_per_worker=4", "train_for_env_steps=100000000", "logger.log_interval_sec=0.5"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # wait until it really trains
        output.append(line)
        if "env steps" in line and "FPS" in line or time.monotonic() > deadline:
            break
    family = psutil.Process(proc.pid).children(recursive=True)
    assert len(family) >= 2, "".join(output)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    log = "".join(output) + rest
    assert proc.returncode == 128 + signal.SIGINT, log  # stopped by a signal: 128 + its number
    assert "received SIGINT" in log
    ckpt = torch.load(tmp_path / "sigint" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["sf_hydra"]["env_steps"] > 0
    # every process of the run ends within seconds (torch's shm manager ends ~2 s after its last client left)
    _, alive = psutil.wait_procs(family, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], log
