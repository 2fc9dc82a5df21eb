"""torchrun on one machine (`torchrun --nproc-per-node=2 train.py hardware.devices=2 ...`): each worker is one rank,
nothing is started by us, one run folder (rank 0's: its Hydra files, its log; the other ranks log to ranks/), the
same learner state on every rank; hardware keys that contradict torchrun's variables are refused by name before
anything is written; a worker killed mid-run makes torchrun (--max-restarts) start the workers again, and the run
resumes from its last checkpoint in the same folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

import pytest
import torch

from tests.ddp.test_two_ranks import _same
from tests.faults.runs import REPO, TINY, env_with_repo

STATE = "tests.helpers.rank_state.WriteRankState"


def torchrun(*args: str) -> list:
    found = shutil.which("torchrun") or pytest.skip("torchrun (torch's launcher) is not on PATH")
    return [found, "--standalone", *args, str(REPO / "train.py")]  # --standalone: a rendezvous on a free port


def run_torchrun(cmd: list, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in env_with_repo().items() if k not in ("WORLD_SIZE", "LOCAL_RANK", "RANK", "MASTER_PORT")}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow  # ~1 min: two workers
def test_torchrun_workers_train_one_run_with_identical_learner_state(tmp_path):
    states, train_dir = tmp_path / "states", tmp_path / "train"
    cmd = torchrun("--nproc-per-node=2") + [f"train_dir={train_dir}", "experiment=run", *TINY, "hardware.devices=2",
                                            f"+callbacks.rank_state._target_={STATE}",
                                            f"+callbacks.rank_state.directory={states}"]
    done = run_torchrun(cmd, tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "in use by a live run" not in out

    # One run folder: rank 0's Hydra files and log, rank 1's log in ranks/; every rank's frames counted.
    assert sorted(p.name for p in train_dir.iterdir()) == ["run"]
    run = train_dir / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 2 * 32 * summary["policy_version"], summary  # 2 ranks x algo.batch_size
    assert (run / "train.log").read_text().count("run folder ") == 1
    assert "learner rank 1 of torchrun's 2 workers" in (run / "ranks" / "rank_1.log").read_text()
    assert (run / ".hydra" / "overrides.yaml").is_file()

    ranks = [torch.load(states / f"rank_{r}.pt", weights_only=False) for r in (0, 1)]
    assert _same(ranks[0], ranks[1]) == [], "the ranks' learner states differ"
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert _same(ckpt["state_dict"], ranks[0]["weights"]) == []
    assert ckpt["sf_hydra"]["env_steps"] == summary["env_steps"] == ranks[1]["sf_hydra"]["env_steps"]


@pytest.mark.slow
@pytest.mark.parametrize(("asked", "key"), [(["hardware.devices=1"], "hardware.devices"),
                                            (["hardware.devices=2", "hardware.num_nodes=2"], "hardware.num_nodes")],
                         ids=["devices", "num_nodes"])
def test_hardware_keys_that_contradict_torchrun_are_refused_before_anything_is_written(tmp_path, asked, key):
    cmd = torchrun("--nproc-per-node=2") + [f"train_dir={tmp_path / 'train'}", "experiment=run", *TINY, *asked]
    done = run_torchrun(cmd, tmp_path, timeout=180)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    refusals = [line for line in out.splitlines() if line.startswith(f"bad config: {key}=")]
    assert refusals and "WORLD_SIZE" in refusals[0], out[-3000:]
    assert not (tmp_path / "train").exists()


def _worker(agent: int, rank: int) -> Optional[int]:
    """The pid of torchrun's (process `agent`) worker of global rank `rank`, None when there is none (yet)."""
    try:
        children = Path(f"/proc/{agent}/task/{agent}/children").read_text().split()
    except OSError:
        return None
    for pid in map(int, children):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return pid
    return None


def _marked(mark: str) -> list:
    """The pids of the live processes (zombies aside) whose environment holds SF_TEST_MARK=`mark`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            marked = f"SF_TEST_MARK={mark}".encode() in (entry / "environ").read_bytes().split(b"\0")
            alive = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except (OSError, IndexError):
            continue
        if marked and alive:
            found.append(int(entry.name))
    return found


def _numbered(run: Path) -> list:
    return sorted((run / "checkpoints").glob("checkpoint_*.ckpt"))


@pytest.mark.slow  # ~2 min: two starts of two workers
def test_a_killed_worker_restarts_and_the_run_resumes_from_its_last_checkpoint(tmp_path):
    run = tmp_path / "train" / "run"
    cmd = torchrun("--nproc-per-node=2", "--max-restarts=1") + [
        f"train_dir={tmp_path / 'train'}", "experiment=run", *TINY, "hardware.devices=2", "train_for_env_steps=12000",
        "save_every_sec=1", "keep_checkpoints=100", "hardware.ddp_timeout_sec=20"]
    env = {k: v for k, v in env_with_repo().items() if k not in ("WORLD_SIZE", "LOCAL_RANK", "RANK", "MASTER_PORT")}
    env["SF_TEST_MARK"] = mark = f"elastic-{os.getpid()}-{time.monotonic_ns()}"  # every process of this run has it
    with open(tmp_path / "out.txt", "w") as out:
        agent = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while not _numbered(run) and agent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        victim = _worker(agent.pid, 1)
        assert victim is not None and _numbered(run), (tmp_path / "out.txt").read_text()[-3000:]
        killed_at = int(_numbered(run)[-1].stem.split("_")[1])
        os.kill(victim, signal.SIGKILL)
        code = agent.wait(timeout=300)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    said = (tmp_path / "out.txt").read_text()
    assert code == 0, said[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= 12000 > killed_at and summary["stop_reason"].startswith("train_for_env_steps")
    assert "resuming from" in (run / "train.log").read_text(), said[-3000:]
    assert sorted(p.name for p in run.parent.iterdir()) == ["run"]  # the same folder, none moved aside
    for ckpt in sorted((run / "checkpoints").glob("*.ckpt")):
        torch.load(ckpt, map_location="cpu", weights_only=True)  # every checkpoint loads, without a pickle
    deadline = time.monotonic() + 15  # the killed start's sampler workers end with their learner (parent watch)
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _marked(mark) == [], "processes of the run outlived it"
