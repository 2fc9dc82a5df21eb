"""The profile at the end of a run: seconds per component of the learner's process and of the rollout
workers, in summary.json and the log (learner/profile.py)."""

import json
import subprocess
import sys

import pytest

from sf_hydra.core.clock import seconds_since_launch
from sf_hydra.learner.profile import LEARNER_PARTS, WORKER_PARTS, RunProfile, profile_lines
from sf_hydra.sampler.training_batches import timing_since


def test_learner_parts_and_the_rest_make_the_session():
    profile = RunProfile()
    profile.learner.update(wait_for_data=2.0, forward_backward=1.0)
    profile.add_workers({"env_step": 3.0, "inference": 1.0})
    profile.add_workers({"env_step": 1.0})
    profile.start -= 10.0  # a session of 10 s
    profile.stop()
    report = profile.report()
    assert abs(report["session_seconds"] - 10.0) < 0.1
    assert abs(report["learner"]["other"]["seconds"] - 7.0) < 0.1
    assert abs(sum(p["fraction"] for p in report["learner"].values()) - 1.0) < 1e-3
    assert report["workers"]["env_step"] == {"seconds": 4.0, "fraction": 0.8}
    first, second = profile_lines(report)
    assert first.index("other") < first.index("wait_for_data") < first.index("forward_backward")  # largest first
    assert "env_step 4.0 s (80%)" in second


@pytest.mark.slow
def test_a_run_reports_where_its_time_went(short_cartpole_run):
    train_dir, summary, messages = short_cartpole_run
    profile = json.loads((train_dir / "test" / "summary.json").read_text())["profile"]
    assert profile == json.loads(json.dumps(summary["profile"]))
    learner, workers = profile["learner"], profile["workers"]
    assert set(LEARNER_PARTS) | {"other"} == set(learner), learner
    assert set(WORKER_PARTS) == set(workers), workers
    # start_workers is not among them: a fresh run's workers start before the learner asks for data (train.py's
    # early start), so what is left of it here can round to 0.000 s.
    for part in ("forward_backward", "optimizer", "prepare_batch", "publish_weights"):
        assert learner[part]["seconds"] > 0, (part, learner)
    for part in ("env_step", "inference"):
        assert workers[part]["seconds"] > 0, (part, workers)
    assert sum(p["seconds"] for p in learner.values()) <= profile["session_seconds"] + 0.01
    assert abs(sum(p["fraction"] for p in workers.values()) - 1.0) < 1e-3
    # The workers' seconds are the session's: those they spent before it (collecting, then waiting for slots
    # while the learner was built) are start-up. 2 workers (FAST_OVERRIDES); a rollout ends at most a
    # moment after the session's last batch.
    worker_seconds = sum(p["seconds"] for p in workers.values())
    assert worker_seconds <= 2 * profile["session_seconds"] + 0.5, (worker_seconds, profile)
    assert any(m.startswith("profile of this session") for m in messages)
    startup = profile["startup"]  # from this (pytest) process's launch: the whole test session until then
    assert 0 < startup["first_rollout_s"] <= startup["first_trajectory_s"] + 0.01, startup  # reported, then taken
    assert startup["first_trajectory_s"] <= startup["first_update_s"] <= seconds_since_launch(), startup
    assert any(m.startswith("start-up, seconds after launch: first rollout reported") for m in messages)


def test_a_rollouts_seconds_before_the_session_come_out_of_its_wait_first_then_in_proportion():
    timing = {"wait_for_slots": 4.0, "env_step": 3.0, "inference": 1.0}  # began at t=100, reported at t=108
    assert timing_since(timing, 100.0, 99.0) == timing  # began within the session: whole
    assert timing_since(timing, 0.0, 105.0) == timing  # when it began is unknown: whole
    assert timing_since(timing, 100.0, 103.0) == {"wait_for_slots": 1.0, "env_step": 3.0, "inference": 1.0}
    # 6 s before: the 4 s of waiting, then 2 of the other 4 s, half of each
    assert timing_since(timing, 100.0, 106.0) == {"wait_for_slots": 0.0, "env_step": 1.5, "inference": 0.5}
    assert timing_since(timing, 100.0, 120.0) == {"wait_for_slots": 0.0, "env_step": 0.0, "inference": 0.0}
    assert timing_since({"env_step": 2.0}, 100.0, 101.0) == {"env_step": 1.0}  # no wait recorded


def test_seconds_since_launch_counts_from_the_process_start_not_from_the_import():
    code = ("import time; time.sleep(1.5); from sf_hydra.core.clock import seconds_since_launch; "
            "print(seconds_since_launch())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 1.5 <= float(out) < 1.5 + 10.0, out


def test_startup_milestones_keep_the_first_report():
    profile = RunProfile()
    profile.mark_startup("first_trajectory_s", None)  # a batch from before the milestone was known
    profile.mark_startup("first_trajectory_s", 2.5)
    profile.mark_startup("first_trajectory_s", 9.0)
    assert profile.report()["startup"] == {"first_trajectory_s": 2.5}
    assert profile_lines(profile.report())[-1] == "start-up, seconds after launch: learner's first trajectory 2.5 s"
