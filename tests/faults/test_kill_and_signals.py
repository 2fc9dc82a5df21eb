"""The main process killed, or stopped by a signal at start-up or mid-run: the run resumes
from its last checkpoint, no process is left behind, and no shared memory either (a killed
run's leftovers are removed by the next run)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


def _start(tmp_path, *overrides):
    cmd = [sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=run",
           "hardware.num_envs_per_worker=4", "logger.log_interval_sec=0.5", "save_every_sec=1", *overrides]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _wait_for(proc, text: str) -> None:
    for line in proc.stdout:
        if text in line:
            return
    pytest.fail(f"the run ended before printing {text!r}")


def _tree(proc):
    return [proc.pid] + [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]


def _gone(pids, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
            return True
        time.sleep(0.2)
    return False


def _shared_memory_of(pids):
    return [n for n in os.listdir("/dev/shm") if n.split("_")[:1] == ["torch"] and int(n.split("_")[1]) in pids]


@pytest.mark.slow
def test_kill_9_of_the_main_process_then_resume(tmp_path):
    proc = _start(tmp_path, "train_for_env_steps=100000000")
    _wait_for(proc, "env steps")
    time.sleep(2.5)  # a periodic checkpoint (save_every_sec=1) is on disk
    pids = _tree(proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _gone(pids), "rollout workers outlived the killed learner"
    saved = (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()
    assert saved
    resumed = subprocess.run([sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=run",
                              "hardware.num_envs_per_worker=4", "train_for_env_steps=30000"],
                             cwd=REPO, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming from last.ckpt" in resumed.stdout + resumed.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["env_steps"] >= 30000
    assert not _shared_memory_of(pids), "the killed run's shared memory is still there after the next run"


@pytest.mark.parametrize("sig, when", [(signal.SIGTERM, "start-up"), (signal.SIGTERM, "mid-run"),
                                       # Ctrl+C mid-run: also test_ctrl_c_with_inference_servers_... in CI
                                       pytest.param(signal.SIGINT, "mid-run", marks=pytest.mark.long)])
@pytest.mark.slow
def test_a_stop_signal_leaves_no_process_and_no_shared_memory(tmp_path, sig, when):
    proc = _start(tmp_path, "train_for_env_steps=100000000")
    _wait_for(proc, "run folder" if when == "start-up" else "env steps")
    pids = _tree(proc)
    time.sleep(0.3)
    pids = sorted(set(pids) | set(_tree(proc)))
    os.kill(proc.pid, sig)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, output[-2000:]
    assert _gone(pids)
    assert not _shared_memory_of(pids)
    # During start-up too the run ends saved (test_signal_during_save.py: a signal before training starts)
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").exists(), output[-2000:]


@pytest.mark.slow
def test_ctrl_c_with_inference_servers_leaves_no_process_and_keeps_the_checkpoint(tmp_path):
    proc = _start(tmp_path, "train_for_env_steps=100000000", "hardware.inference=server",
                  "hardware.worker_num_splits=2")
    _wait_for(proc, "env steps")
    time.sleep(0.3)
    pids = _tree(proc)
    assert len(pids) >= 4  # the learner, 2 rollout workers, the inference server
    os.kill(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, output[-2000:]
    assert _gone(pids)
    assert not _shared_memory_of(pids)
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_final_save_does_not_lose_it(tmp_path, monkeypatch, sig):
    """The run has reached its budget and is writing its final checkpoint when a stop signal
    comes (in a Slurm job: a preemption just then). The signal is noted, the save completes,
    and the run returns its summary; before, the handlers were given back at the end of fit,
    and the signal's old handler (KeyboardInterrupt, or submitit's requeue-and-exit) cut the
    save off."""
    import torch

    from sf_hydra.app.train import train
    from sf_hydra.core import signals
    from sf_hydra.learner.checkpointing import PeriodicCheckpoint
    from tests.conftest import make_cfg

    save = PeriodicCheckpoint.save
    arrived = []

    def signalled_then_save(self, trainer, env_steps):
        if trainer.should_stop and not arrived:  # the final save, after fit
            os.kill(os.getpid(), sig)
            arrived.append(sig)
        return save(self, trainer, env_steps)

    monkeypatch.setattr(PeriodicCheckpoint, "save", signalled_then_save)
    before = signal.getsignal(sig)
    summary = train(make_cfg(tmp_path, "hardware.num_workers=1", "train_for_env_steps=2000"))
    assert arrived == [sig]
    assert signals.received() == sig  # noted, for the launcher to act on after the run returned
    assert signal.getsignal(sig) == before  # given back once the run returned
    last = torch.load(tmp_path / "test" / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["sf_hydra"]["env_steps"] == summary["env_steps"] >= 2000
