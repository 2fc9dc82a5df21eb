"""Weights & Biases beside TensorBoard (`logger=wandb`), offline: real short CartPole runs
whose offline W&B files are read back (config, scalars, id, group), a resume continuing
the same W&B run, a sweep grouping its runs, enjoy's GIFs landing in the run's W&B run, and
a W&B that cannot start (bad project, package missing) costing a warning, not the run."""

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sf_hydra.app.loggers import finish_wandb, start_wandb, wandb_group
from sf_hydra.app.train import train
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import FAST_OVERRIDES, REPO_ROOT, make_cfg
from tests.helpers.wandb_records import read_run, run_files

pytest.importorskip("wandb", reason="the wandb extra is not installed")

SCALARS = {"perf/fps", "perf/env_steps", "episode/return", "episode/length", "loss/policy", "loss/value",
           "learner/kl", "learner/lr", "policy_lag/avg"}


@pytest.fixture(autouse=True)
def wandb_offline(tmp_path, monkeypatch):
    """Offline, and nothing written outside tmp_path (W&B's settings, cache and staging folders)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    for var, sub in (("WANDB_CONFIG_DIR", "config"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data")):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / sub))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_PROJECT", raising=False)


@pytest.mark.slow
def test_run_logs_config_and_the_tensorboard_scalars_and_a_resume_keeps_its_id(tmp_path):
    first = train(make_cfg(tmp_path, "logger=wandb", "train_for_env_steps=3000", "logger.wandb_tags=[a,b]"))
    run_dir = tmp_path / "test"
    run_id = (run_dir / "wandb_id").read_text().strip()
    [path] = run_files(run_dir)
    run = read_run(path)
    assert run["id"] == run_id and run["project"] == "sf_hydra" and run["name"] == "test"
    assert run["job_type"] == "SF" and run["tags"] == ["a", "b"] and run["group"] == ""
    # The resolved config, as config.yaml has it.
    assert run["config"]["env"]["id"] == "CartPole-v1"
    assert run["config"]["algo"]["batch_size"] == 128
    assert run["config"]["logger"]["with_wandb"] is True
    assert run["config"]["model"]["rnn_type"] == "gru"  # an Enum, as its name
    # The same scalars as TensorBoard, at the same env steps.
    history, tb = run["history"], read_scalars(run_dir)
    assert SCALARS <= set(history), SCALARS - set(history)
    assert SCALARS <= set(tb), SCALARS - set(tb)
    assert history["perf/env_steps"][-1] == first["env_steps"]
    assert history["trainer/global_step"] == [s.step for s in tb["perf/env_steps"]]
    assert history["perf/env_steps"] == [s.value for s in tb["perf/env_steps"]]

    second = train(make_cfg(tmp_path, "logger=wandb", "train_for_env_steps=6000"))
    assert (run_dir / "wandb_id").read_text().strip() == run_id
    old, new = run_files(run_dir)
    assert old == path
    resumed = read_run(new)
    assert resumed["id"] == run_id
    steps = resumed["history"]["perf/env_steps"]
    assert steps[0] > first["env_steps"] - 1 and steps[-1] == second["env_steps"] >= 6000


@pytest.mark.slow
def test_a_restarted_run_gets_a_new_wandb_run(tmp_path):
    train(make_cfg(tmp_path, "logger=wandb", "train_for_env_steps=1000"))
    first_id = (tmp_path / "test" / "wandb_id").read_text()
    train(make_cfg(tmp_path, "logger=wandb", "train_for_env_steps=1000", "restart_behavior=overwrite"))
    assert (tmp_path / "test" / "wandb_id").read_text() != first_id


@pytest.mark.slow
def test_enjoy_videos_go_to_the_runs_wandb_run(tmp_path):
    train(make_cfg(tmp_path, "logger=wandb", "train_for_env_steps=1000"))
    run_dir = tmp_path / "test"
    cmd = [sys.executable, str(REPO_ROOT / "enjoy.py"), f"train_dir={tmp_path}", "experiment=test", "episodes=2",
           "video=true", "max_episode_steps=10"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    _, enjoy_file = run_files(run_dir)
    run = read_run(enjoy_file)
    assert run["id"] == (run_dir / "wandb_id").read_text().strip()
    eval_json = json.loads((run_dir / "enjoy" / "eval.json").read_text())
    assert run["history"]["enjoy/mean_return"] == [eval_json["mean_return"]]
    for i in range(2):
        assert run["history"][f"enjoy/episode_{i:03d}/_type"] == ["video-file"]
        [logged] = run["history"][f"enjoy/episode_{i:03d}/path"]
        video = enjoy_file.parent / "files" / logged
        assert video.read_bytes() == Path(eval_json["episodes"][i]["video"]).read_bytes()


@pytest.mark.slow
def test_evaluation_scalars_and_videos_go_to_the_runs_wandb_run(tmp_path):
    """Evaluation during training (eval.*) logs eval/* scalars beside TensorBoard's and, every
    eval.video_every evaluations, the evaluated game's video file, into the run's own W&B run."""
    train(make_cfg(tmp_path, "logger=wandb", "train_for_env_steps=12000", "eval.every_env_steps=5000",
                   "eval.episodes=2", "eval.max_episode_steps=50", "eval.video_every=1", "eval.video_frames=20",
                   "eval.video_format=gif", "train_until_avg_return=null"))
    run_dir = tmp_path / "test"
    records = [json.loads(line) for line in (run_dir / "eval" / "evaluations.jsonl").read_text().splitlines()]
    assert len(records) >= 2 and all(r["video"] for r in records)
    [path] = run_files(run_dir)
    history = read_run(path)["history"]
    assert history["eval/return"] == [pytest.approx(r["policies"][0]["return"]) for r in records]
    # one video per evaluation, the file the evaluation wrote (W&B keeps a copy under the run's files/)
    assert history["eval/video/_type"] == ["videos"] * len(records)
    logged = [path.parent / "files" / video["path"] for [video] in history["eval/video/videos"]]
    assert [f.read_bytes() for f in logged] == [Path(r["video"]).read_bytes() for r in records]


@pytest.mark.slow  # a two-run sweep through train.py (~20 s); wandb_group's other cases are checked below
def test_sweep_runs_are_grouped_under_the_sweep_name(tmp_path):
    """Both runs of a --multirun sweep are W&B runs of one group, the sweep's folder name
    (their offline run files say so), each its own run named by its overrides."""
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), "--multirun", f"train_dir={tmp_path}", *FAST_OVERRIDES,
           "hardware.num_workers=1", "seed=1,2", "logger=wandb", "train_for_env_steps=500"]
    result = subprocess.run(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=400)
    assert result.returncode == 0, result.stdout[-3000:]
    [sweep] = (tmp_path / "multirun").iterdir()
    assert "logger" not in sweep.name  # where scalars go is not part of what a sweep computes
    ids = set()
    for seed in (1, 2):
        run_dir = sweep / f"seed={seed}"
        [path] = run_files(run_dir)
        run = read_run(path)
        assert run["group"] == sweep.name
        assert run["name"] == f"seed={seed}"
        assert run["config"]["seed"] == seed
        ids.add(run["id"])
    assert len(ids) == 2


def test_the_group_is_the_key_else_none_outside_a_sweep(tmp_path):
    assert wandb_group(make_cfg(tmp_path, "logger=wandb", "logger.wandb_group=ablation")) == "ablation"
    assert wandb_group(make_cfg(tmp_path, "logger=wandb")) is None  # a single run is not grouped


@pytest.mark.slow
def test_a_failing_wandb_init_leaves_a_warning_and_tensorboard(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="sf_hydra")
    summary = train(make_cfg(tmp_path, "logger=wandb", "logger.wandb_project='bad/name'",
                             "train_for_env_steps=1000"))
    assert summary["env_steps"] >= 1000
    warnings = [r.getMessage() for r in caplog.records if "W&B" in r.getMessage()]
    assert len(warnings) == 1 and "wandb.init failed" in warnings[0] and "bad/name" in warnings[0], warnings
    assert read_scalars(tmp_path / "test")["perf/env_steps"][-1].value == summary["env_steps"]
    assert not (tmp_path / "test" / "wandb_id").exists()


@pytest.mark.slow
def test_a_missing_wandb_package_leaves_a_warning_and_tensorboard(tmp_path, caplog, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError, as without the package
    caplog.set_level(logging.WARNING, logger="sf_hydra")
    summary = train(make_cfg(tmp_path, "logger=wandb", "train_for_env_steps=1000"))
    lines = [r.getMessage() for r in caplog.records if "W&B" in r.getMessage()]
    assert len(lines) == 1 and "wandb package is missing" in lines[0], lines
    assert json.loads((tmp_path / "test" / "summary.json").read_text())["env_steps"] == summary["env_steps"] >= 1000
    assert read_scalars(tmp_path / "test")["perf/env_steps"][-1].value == summary["env_steps"]
    assert not (tmp_path / "test" / "wandb").exists()


@pytest.mark.slow  # starts wandb offline (~4 s)
def test_wandb_start_prints_no_anonymous_warning(tmp_path, monkeypatch, capfd):
    """Lightning's WandbLogger passes `anonymous=None`, which wandb warns about on every run; we leave it out."""
    monkeypatch.delenv("WANDB_SILENT")  # the warning goes to stderr, which silent mode would hide
    (tmp_path / "run").mkdir()
    wandb_logger = start_wandb(make_cfg(tmp_path, "logger=wandb"), tmp_path / "run", resuming=False)
    try:
        assert wandb_logger is not None
    finally:
        finish_wandb(failed=False)
    err = capfd.readouterr().err
    assert "wandb" in err.lower() and "anonymous" not in err.lower(), err


def test_the_record_reader_follows_records_across_blocks(tmp_path):
    """The .wandb reader on a file of several 32 KiB blocks (a long run's): records split
    over blocks come back whole and in order."""
    import wandb

    run = wandb.init(dir=str(tmp_path), project="reader", id="reader1", config={"x": 1})
    for i in range(600):
        run.log({"a/long_scalar_name_to_fill_blocks": float(i), "b": "x" * (i % 97)})
    run.finish()
    [path] = run_files(tmp_path)
    # wandb-core may still be writing the last records when finish() returns on a busy machine.
    deadline = time.monotonic() + 20
    while len(read_run(path)["history"].get("b", [])) < 600 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert path.stat().st_size > 3 * 32 * 1024
    history = read_run(path)["history"]
    assert history["a/long_scalar_name_to_fill_blocks"] == list(range(600))
    assert history["b"] == ["x" * (i % 97) for i in range(600)]
