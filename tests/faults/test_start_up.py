"""Faults while a run starts: an env whose __init__ or reset() raises (one framed line naming the env, then the
tail of the env's own traceback, exit code 1), and Ctrl+C during start-up (exit code 130, one line)."""

import signal
import subprocess
import sys
import time

import pytest

from tests.faults.runs import REPO, TINY, env_with_repo, train_py


@pytest.mark.parametrize("env_id,raised", [
    ("BrokenInitCartPole-v0", "FileNotFoundError: broken-init: the simulator's asset file is missing"),
    ("BrokenResetCartPole-v0", "RuntimeError: broken-reset: the simulator refused to reset"),
])
@pytest.mark.slow
def test_env_that_fails_to_start_is_named_with_its_traceback_tail(tmp_path, env_id, raised):
    full_id = f"tests.helpers.faulty_envs:{env_id}"
    proc = train_py(tmp_path, "env=gym/any", f"env.id={full_id}")
    assert proc.returncode == 1, proc.out
    framed = [line for line in proc.out.splitlines() if "failed to start" in line]
    assert len(framed) == 1 and f"env gym/{full_id} failed to start: {raised}" in framed[0], proc.out
    tail = proc.out.split(framed[0], 1)[1]
    assert "faulty_envs.py" in tail and tail.strip().endswith(raised), proc.out  # where the env raised it
    assert "Error executing job" not in proc.out and "Traceback (most recent call last)" not in proc.out, proc.out


@pytest.mark.slow
def test_an_env_key_the_envs_own_check_refuses_is_a_bad_config_not_a_crash(tmp_path):
    """DoomEnv checks env.downsample and env.resize when the probe env is built: that is still before any
    process starts, and it reads as every other bad config (one line naming key, value and what is allowed)."""
    pytest.importorskip("vizdoom", reason="the doom extra (vizdoom) is not installed")
    from sf_hydra.core.faults import EXIT_BAD_CONFIG

    refusals = [("env.downsample=0", "bad config: env.downsample=0 is not allowed: an integer >= 1"),
                ("env.resize=[0,72]", "bad config: env.resize=[0, 72] is not allowed: null or [width, height], two")]
    for override, said in refusals:
        proc = train_py(tmp_path, "env=doom/basic", override)
        assert proc.returncode == EXIT_BAD_CONFIG, proc.out
        assert said in proc.out, proc.out
        assert "failed to start" not in proc.out and "Traceback" not in proc.out, proc.out


@pytest.mark.slow
def test_ctrl_c_during_start_up_exits_quietly(tmp_path):
    cmd = [sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=run", *TINY, "env=gym/any",
           "env.id=tests.helpers.faulty_envs:SlowInitCartPole-v0"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env_with_repo())
    seen = []
    for line in proc.stdout:  # the env takes 30 s to build: interrupt it there
        seen.append(line)
        if "building env" in line:
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    out = "".join(seen) + rest
    assert proc.returncode == 128 + signal.SIGINT, out
    assert rest.strip() == "interrupted (SIGINT): stopped", out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
