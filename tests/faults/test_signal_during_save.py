"""Stop signals that land while a checkpoint is being written, of every kind (periodic, best, milestone, the
final one): the run still ends saved, and a resume starts from the newest learner state on disk.

A stop signal delivered twice at once (a terminal's process group plus a launcher that forwards it, or
`timeout`) is one request; a later repeat aborts, but only once the save under way is on disk, and says so."""

import json
import signal

import pytest
import torch

from sf_hydra.core.run_dir import learner_states, resume_checkpoint
from tests.faults.runs import train_py

CALLBACK = "+callbacks.signal_in_save"
# What each kind of save needs to happen early in a small CartPole run (the others kept out of the way)
SAVES = {
    "periodic": ("save_every_sec=1.5",),
    "best": ("save_every_sec=1000", "save_best_every_sec=0.5", "save_best_after=0"),
    "milestone": ("save_every_sec=1000", "save_milestones_sec=1.5"),
    "final": ("save_every_sec=1000", "train_for_env_steps=3000"),
}


def _run(tmp_path, kind: str, sig: str, count: int, gap_sec: float, at: int = 2):
    marker = tmp_path / "signalled_at"
    budget = () if kind == "final" else ("train_for_env_steps=100000000",)
    proc = train_py(tmp_path, *SAVES[kind], *budget, "algo.batch_size=64", f"{CALLBACK}._target_="
                    "tests.helpers.signal_in_save.SignalDuringSave", f"{CALLBACK}.kind={kind}",
                    f"{CALLBACK}.signal={sig}", f"{CALLBACK}.count={count}", f"{CALLBACK}.gap_sec={gap_sec}",
                    f"{CALLBACK}.at={1 if kind == 'final' else at}", f"{CALLBACK}.marker={marker}", timeout=180)
    assert marker.exists(), f"no {kind} save happened:\n{proc.out[-3000:]}"
    return proc, int(marker.read_text())


def _steps(path) -> int:
    return int(torch.load(path, map_location="cpu", weights_only=True)["sf_hydra"]["env_steps"])


def _newest_learner_state(run):
    """The env steps of every learner state on disk, and of the one a resume starts from."""
    every = {p.name: _steps(p) for p in learner_states(run / "checkpoints")}
    return every, _steps(resume_checkpoint(run))


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("kind", ["periodic", "best", "milestone", "final"])
def test_a_stop_signal_delivered_twice_during_a_save_ends_saved(tmp_path, kind, sig):
    proc, signalled_at = _run(tmp_path, kind, sig, count=2, gap_sec=0.005)
    assert proc.returncode == 128 + signal.Signals[sig], proc.out[-3000:]
    assert f"received {sig}: saving a checkpoint and stopping" in proc.out, proc.out[-3000:]
    assert "stopped (signal" in proc.out or kind == "final", proc.out[-3000:]
    assert "stopped (" in proc.out and "without a final checkpoint" not in proc.out, proc.out[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    every, resumed = _newest_learner_state(tmp_path / "run")
    # The final save holds where training stopped: a resume loses nothing, and nothing on disk is newer
    assert resumed == summary["env_steps"] == _steps(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert resumed == max(every.values()) >= signalled_at, every


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["periodic", "best"])
def test_a_later_repeat_during_a_save_aborts_once_that_save_is_on_disk(tmp_path, kind):
    """The second Ctrl+C comes 1.3 s after the first (no duplicate), while the save is still being written: the
    run stops without its final checkpoint, but that save completes and is where a resume starts."""
    proc, signalled_at = _run(tmp_path, kind, "SIGINT", count=2, gap_sec=1.3)
    assert proc.returncode == 130, proc.out[-3000:]
    assert "received SIGINT again: stopping without the final checkpoint, once the checkpoint being written" \
        in proc.out, proc.out[-3000:]
    assert "received SIGINT again: stopping now, without a final checkpoint; the newest learner state on disk " \
        "is " in proc.out, proc.out[-3000:]
    assert "interrupted (SIGINT): stopped" in proc.out, proc.out[-3000:]
    every, resumed = _newest_learner_state(tmp_path / "run")
    saved = "best_p0.ckpt" if kind == "best" else f"checkpoint_{signalled_at:012d}.ckpt"
    assert every[saved] == signalled_at, every  # the save the signals landed in is whole
    assert resumed == max(every.values()) == signalled_at, every


@pytest.mark.slow
@pytest.mark.parametrize("hook, sig", [("setup", "SIGINT"), ("on_fit_start", "SIGTERM")])
def test_a_stop_signal_before_training_starts_ends_saved_as_training_starts(tmp_path, hook, sig):
    """Start-up (the sampler's processes, Lightning's setup, a restore) can take a while: a stop signal then is
    taken, and the run stops as training starts, with a checkpoint of the state it started from."""
    node = "+callbacks.signal_early"
    proc = train_py(tmp_path, "train_for_env_steps=100000000",
                    f"{node}._target_=tests.helpers.signal_in_save.SignalBeforeTraining", f"{node}.hook={hook}",
                    f"{node}.signal={sig}", timeout=180)
    assert proc.returncode == 128 + signal.Signals[sig], proc.out[-3000:]
    assert f"received {sig}: saving a checkpoint and stopping (during start-up: once training starts)" in proc.out
    assert f"stopped (signal {sig}): " in proc.out, proc.out[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert _steps(tmp_path / "run" / "checkpoints" / "last.ckpt") == summary["env_steps"] == 0
