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
                                       (signal.SIGINT, "mid-run")])
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
    if when == "mid-run":
        assert (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()
