"""Two runs in one folder: a run folder that a live run holds refuses a second run (exit code 3, the
holder's pid, nothing written into the folder), the lock goes with its holder even after kill -9, and
in a sweep each run's folder is locked on its own."""

import errno
import fcntl
import json
import signal
import subprocess
import sys
import time

import pytest

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.faults import EXIT_BAD_CONFIG, EXIT_BUSY, RunFolderBusy
from sf_hydra.core.run_dir import LOCK_ENV, RunLock
from tests.faults.runs import REPO, TINY, env_with_repo, train_py

HOLD = ("import sys, time; from pathlib import Path; from sf_hydra.core.run_dir import RunLock; "
        "RunLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(600)")


def _holder(run_dir) -> subprocess.Popen:
    """A process that takes the run folder's lock and keeps it until it is killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True,
                            env=env_with_repo())
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.slow
def test_live_run_refuses_a_second_run_on_its_folder(tmp_path):
    first = subprocess.Popen([sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=run",
                              *TINY, "seed=11", "train_for_env_steps=100000000"],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        for line in first.stdout:  # until it really trains
            if "env steps" in line and "FPS" in line or time.monotonic() > deadline:
                break
        second = train_py(tmp_path, "seed=22")
        assert second.returncode == EXIT_BUSY, second.out
        assert f"is in use by a live run (pid {first.pid})" in second.out, second.out
        assert "Traceback" not in second.out
        run = tmp_path / "run"
        assert "seed=11" in (run / ".hydra" / "overrides.yaml").read_text()  # Hydra's files are the first run's
        assert "seed=22" not in (run / "train.log").read_text()
    finally:
        first.send_signal(signal.SIGINT)
        rest, _ = first.communicate(timeout=60)
    assert first.returncode == 128 + signal.SIGINT, rest


@pytest.mark.slow
def test_lock_is_not_stuck_after_its_holder_is_killed(tmp_path):
    holder = _holder(tmp_path / "run")
    refused = train_py(tmp_path)
    assert refused.returncode == EXIT_BUSY and f"pid {holder.pid}" in refused.out, refused.out
    assert not (tmp_path / "run" / ".hydra").exists() and not (tmp_path / "run" / "train.log").exists()
    holder.kill()  # SIGKILL: no clean-up of its own
    holder.wait(timeout=10)
    done = train_py(tmp_path)
    assert done.returncode == 0, done.out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["env_steps"] >= 2000


def test_lock_in_process_is_reentrant_and_exclusive_across_processes(tmp_path):
    with RunLock(tmp_path / "a"), RunLock(tmp_path / "a"):  # the CLI and train() both take it
        probe = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path / "a")], capture_output=True, text=True,
                               env=env_with_repo(), timeout=60)
        assert probe.returncode != 0 and "RunFolderBusy" in probe.stderr
    holder = _holder(tmp_path / "a")  # released: another process can take it
    try:
        with pytest.raises(RunFolderBusy, match=f"pid {holder.pid}"):
            RunLock(tmp_path / "a").acquire()
    finally:
        holder.kill()
        holder.wait(timeout=10)


def _no_locks(fd, operation):
    """fcntl.flock on a file system mounted without locks (Lustre without `-o flock`, some NFS setups)."""
    raise OSError(errno.ENOLCK, "No locks available")


def test_a_file_system_without_locks_is_named_with_the_way_on(tmp_path, monkeypatch):
    # No file system without flock is at hand here: flock fails as it does on one (in this process)
    monkeypatch.setattr(fcntl, "flock", _no_locks)
    monkeypatch.delenv(LOCK_ENV, raising=False)
    with pytest.raises(ConfigError) as refused:
        RunLock(tmp_path / "run").acquire()
    said = str(refused.value)
    assert refused.value.key == "run_dir" and str(tmp_path / "run") in said, said
    assert "No locks available" in said and "file system" in said and f"{LOCK_ENV}=off" in said, said
    monkeypatch.setenv(LOCK_ENV, "off")  # the documented way on, at the user's own risk
    with RunLock(tmp_path / "run"), RunLock(tmp_path / "run"):
        pass


def test_the_command_line_says_it_in_one_line(tmp_path):
    # train.py's own command line with flock failing as on such a file system: one framed line, exit 2
    patched = ("import errno, fcntl, runpy, sys\n"
               "def no_locks(fd, op): raise OSError(errno.ENOLCK, 'No locks available')\n"
               "fcntl.flock = no_locks\n"
               "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
               "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    env = env_with_repo()
    env.pop(LOCK_ENV, None)
    proc = subprocess.run([sys.executable, "-c", patched, str(REPO / "train.py"), f"train_dir={tmp_path}",
                           "experiment=run", *TINY], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_BAD_CONFIG, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bad config: run_dir="), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.long  # kept out of CI's 30 minutes (see pyproject.toml); run with -m long
def test_each_run_of_a_sweep_locks_its_own_folder(tmp_path):
    holder = _holder(tmp_path / "multirun" / "s" / "seed=2")
    try:
        proc = train_py(tmp_path, "sweep_name=s", "seed=1,2", flags=["--multirun"])
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert proc.returncode == 1, proc.out  # Hydra reports the failed run at the end of the sweep
    assert (tmp_path / "multirun" / "s" / "seed=1" / "summary.json").exists(), proc.out
    assert not (tmp_path / "multirun" / "s" / "seed=2" / "summary.json").exists()
    assert f"is in use by a live run (pid {holder.pid})" in proc.out, proc.out
