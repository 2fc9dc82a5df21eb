"""The profile at the end of a run: seconds per component of the learner's process and of the rollout
workers, in summary.json and the log (learner/profile.py)."""

import json
import logging

from sf_hydra.learner.profile import LEARNER_PARTS, WORKER_PARTS, RunProfile, profile_lines
from sf_hydra.train import train
from tests.conftest import make_cfg


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


def test_a_run_reports_where_its_time_went(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="sf_hydra"):
        summary = train(make_cfg(tmp_path, "train_for_env_steps=3000"))
    profile = json.loads((tmp_path / "test" / "summary.json").read_text())["profile"]
    assert profile == json.loads(json.dumps(summary["profile"]))
    learner, workers = profile["learner"], profile["workers"]
    assert set(LEARNER_PARTS) | {"other"} == set(learner), learner
    assert set(WORKER_PARTS) == set(workers), workers
    for part in ("start_workers", "forward_backward", "optimizer", "prepare_batch", "publish_weights"):
        assert learner[part]["seconds"] > 0, (part, learner)
    for part in ("env_step", "inference"):
        assert workers[part]["seconds"] > 0, (part, workers)
    assert sum(p["seconds"] for p in learner.values()) <= profile["session_seconds"] + 0.01
    assert abs(sum(p["fraction"] for p in workers.values()) - 1.0) < 1e-3
    assert any(r.getMessage().startswith("profile of this session") for r in caplog.records)
