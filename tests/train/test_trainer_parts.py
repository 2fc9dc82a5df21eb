"""The Trainer, its callbacks and extra loggers come from config groups (conf/trainer/, conf/callbacks/,
`logger.extra`) built with Hydra's instantiate (sf_hydra.app.trainer_parts): the defaults build what
train.py built by hand, a user adds a callback or a logger from the command line or a YAML file of
their own, and a bad node is refused with its key named (a bad `_target_` before any process starts)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from omegaconf import OmegaConf, open_dict

from sf_hydra.app.checks import check_command_line
from sf_hydra.app.resume_config import config_differences
from sf_hydra.app.train import build_trainer, train
from sf_hydra.config import ConfigError
from tests.conftest import CONF_DIR, REPO_ROOT, make_cfg

USER_CALLBACK = "tests.helpers.user_callbacks.WriteOnTrainEnd"


def _names(trainer) -> list:
    return [type(c).__name__ for c in trainer.callbacks]


def test_the_default_groups_build_what_train_py_built(tmp_cfg, tmp_path):
    from lightning.pytorch.loggers import TensorBoardLogger

    from sf_hydra.learner.checkpointing import BestCheckpoint

    cfg = tmp_cfg("save_every_sec=7", "keep_checkpoints=3", "save_best_metric=len", "train_for_env_steps=5000")
    run_dir = tmp_path / "elsewhere"  # build_trainer's folder, not cfg.run_dir, is where the callbacks write
    trainer, stop, checkpoints = build_trainer(cfg, run_dir, resuming=False)
    assert _names(trainer) == ["PublishPolicy", "StopConditions", "Summaries", "PeriodicCheckpoint", "ResumeState"]
    assert stop is trainer.callbacks[1] and checkpoints is trainer.callbacks[3]
    assert (stop.max_steps, stop.target_return) == (5000, cfg.train_until_avg_return)
    assert (checkpoints.directory, checkpoints.every_sec, checkpoints.keep) == (run_dir / "checkpoints", 7, 3)
    assert isinstance(checkpoints.best, BestCheckpoint)
    assert (checkpoints.best.directory, checkpoints.best.metric) == (run_dir / "checkpoints", "len")
    assert [type(lg) for lg in trainer.loggers] == [TensorBoardLogger]
    assert trainer.max_epochs == -1 and trainer.default_root_dir == str(run_dir)
    assert type(trainer.accelerator).__name__ == "CPUAccelerator" and trainer.precision == "32-true"
    assert not trainer.checkpoint_callback and trainer.progress_bar_callback is None


def test_the_conditional_callbacks_follow_the_keys_that_turn_them_on(tmp_cfg, tmp_path):
    trainer, _, _ = build_trainer(tmp_cfg("selfplay.pool_size=2"), tmp_path / "run", resuming=False)
    assert _names(trainer)[-1] == "OpponentPool" and trainer.callbacks[-1].pool_size == 2
    assert trainer.callbacks[-1].directory == tmp_path / "run" / "selfplay"
    trainer, _, _ = build_trainer(tmp_cfg("pbt.with_pbt=true", "algo.num_policies=2"), tmp_path / "run",
                                  resuming=False)
    assert _names(trainer)[-1] == "PopulationBasedTraining" and trainer.callbacks[-1].dir == tmp_path / "run" / "pbt"
    trainer, _, checkpoints = build_trainer(tmp_cfg("benchmark=true"), tmp_path / "run", resuming=False)
    # nothing saved in a benchmark (ResumeState only adds to what is saved)
    assert _names(trainer) == ["PublishPolicy", "StopConditions", "Summaries", "ResumeState"]
    assert checkpoints is not None  # ... and the return contract holds
    for key in ("eval.every_env_steps=1000", "eval.every_sec=30"):  # either schedule turns the evaluation on
        trainer, _, _ = build_trainer(tmp_cfg(key), tmp_path / "run", resuming=False)
        assert _names(trainer)[-1] == "Evaluation" and trainer.callbacks[-1].run_dir == tmp_path / "run"
    trainer, _, _ = build_trainer(tmp_cfg("+callbacks.summaries._enabled_=false"), tmp_path / "run", resuming=False)
    assert "Summaries" not in _names(trainer)


def test_the_callbacks_take_their_groups_whole(tmp_cfg, tmp_path):
    """eval.*, selfplay.* and logger.* reach their callbacks as one node each (`eval: ${eval}`): every value
    set here arrives, and logger.extra's nodes stay the run's loggers, not built inside the summaries' node."""
    cfg = tmp_cfg("eval.every_env_steps=1000", "eval.every_sec=30", "eval.episodes=3", "eval.deterministic=false",
                  "eval.max_episode_steps=50", "eval.video_every=2", "eval.video_format=gif", "eval.video_frames=9",
                  "+eval.env_overrides.obs_scale=2.0", "selfplay.pool_size=2", "selfplay.snapshot_every_env_steps=7",
                  "selfplay.ratings=false", "selfplay.opponent_sampling=hard", "selfplay.pfsp_exponent=3.0",
                  "logger.log_interval_sec=2", "logger.experiment_summaries_interval=3", "logger.progress=lines",
                  "logger.flush_summaries_interval=4", "logger.summaries_use_frameskip=false", "env.frameskip=2",
                  "+logger.extra.csv._target_=lightning.pytorch.loggers.CSVLogger",
                  "+logger.extra.csv.save_dir=${run_dir}")
    trainer, _, _ = build_trainer(cfg, tmp_path / "run", resuming=False)
    by_name = {type(c).__name__: c for c in trainer.callbacks}
    ev, pool, summaries = by_name["Evaluation"], by_name["OpponentPool"], by_name["Summaries"]
    assert (ev.every_env_steps, ev.every_sec, ev.episodes, ev.deterministic, ev.max_episode_steps) == (
        1000, 30.0, 3, False, 50)
    assert (ev.video_every, ev.video_format, ev.video_frames, ev.env_overrides) == (2, "gif", 9, {"obs_scale": 2.0})
    assert (pool.pool_size, pool.every, pool.rate, pool.sampling, pool.exponent) == (2, 7, False, "hard", 3.0)
    assert (summaries.log_interval, summaries.summaries_interval, summaries.style, summaries.flush_interval) == (
        2, 3, "lines", 4)
    assert ev.frames_per_step == pool.frames_per_step == summaries.frames_per_step == 2
    assert [type(lg).__name__ for lg in trainer.loggers] == ["TensorBoardLogger", "CSVLogger"]


def test_a_group_passed_whole_is_not_repeated_key_by_key():
    """conf/callbacks/default.yaml names eval.*, selfplay.* and pbt.* keys one by one only where a callback reads
    a single key of a group it does not take (or to turn a node on): a new key of such a group needs no line."""
    nodes = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "callbacks" / "default.yaml"), resolve=False)
    single = {f"{name}.{arg}": str(value) for name, node in nodes.items() for arg, value in node.items()
              if arg != "_enabled_" and any(f"${{{g}." in str(value) for g in ("eval", "selfplay", "pbt", "logger"))}
    assert single == {"stop_conditions.target_from_evaluation": "${eval.stop_on_eval_return}",
                      "summaries.with_hyperparams": "${pbt.with_pbt}",
                      "evaluation.use_frameskip": "${logger.summaries_use_frameskip}",
                      "opponent_pool.use_frameskip": "${logger.summaries_use_frameskip}"}


@pytest.fixture(scope="module")
def user_parts_run(tmp_path_factory):
    """A short real CartPole run with a callback and a logger added on the command line."""
    train_dir = tmp_path_factory.mktemp("user_parts")
    out = train_dir / "callback_out" / "done.json"
    summary = train(make_cfg(
        train_dir, "train_for_env_steps=3000",
        f"+callbacks.on_end._target_={USER_CALLBACK}", f"+callbacks.on_end.path={out}", "+callbacks.on_end.note=hi",
        "+logger.extra.csv._target_=lightning.pytorch.loggers.CSVLogger", "+logger.extra.csv.save_dir=${run_dir}",
        "+logger.extra.csv.name=csv", "+logger.extra.csv.version=''"))
    return train_dir / "test", out, summary


@pytest.mark.slow
def test_a_callback_added_on_the_command_line_runs(user_parts_run):
    run_dir, out, summary = user_parts_run
    assert summary["env_steps"] >= 3000 and (run_dir / "checkpoints" / "last.ckpt").is_file()
    written = json.loads(out.read_text())
    assert written == {"env_steps": summary["env_steps"], "note": "hi"}


@pytest.mark.slow
def test_a_logger_added_on_the_command_line_gets_the_scalars(user_parts_run):
    run_dir, _, _ = user_parts_run
    with open(run_dir / "csv" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and "episode/return" in rows[0] and "perf/fps" in rows[0]
    assert any(row["episode/return"] for row in rows)
    assert list((run_dir / "tb").glob("events.out.tfevents.*"))  # TensorBoard still gets them too


def test_a_callback_from_a_yaml_file_of_ones_own(tmp_path):
    """<conf>/callbacks/mine.yaml with `defaults: [default]` and a node, picked by callbacks=mine."""
    conf = tmp_path / "my_conf"
    (conf / "callbacks").mkdir(parents=True)
    (conf / "callbacks" / "mine.yaml").write_text(
        "defaults:\n  - default\n\non_end:\n  _target_: " + USER_CALLBACK + "\n  path: ${run_dir}/done.json\n")
    cfg = check_command_line(["--config-dir", str(conf), "callbacks=mine", f"train_dir={tmp_path / 'runs'}"],
                             str(CONF_DIR)).cfg
    trainer, _, _ = build_trainer(cfg, tmp_path / "runs" / "cartpole", resuming=False)
    assert _names(trainer) == ["PublishPolicy", "StopConditions", "Summaries", "PeriodicCheckpoint", "ResumeState",
                               "WriteOnTrainEnd"]
    assert trainer.callbacks[-1].path == tmp_path / "runs" / "cartpole" / "done.json"


@pytest.mark.parametrize("line,key,says", [
    ("+callbacks.mine._target_=tests.helpers.nope.Mine", "callbacks.mine._target_",
     "No module named 'tests.helpers.nope'"),
    ("+callbacks.mine._target_=tests.helpers.user_callbacks.WriteOnTrainEnds", "callbacks.mine._target_",
     "WriteOnTrainEnds"),
    ("callbacks.checkpoints._target_=sf_hydra.learner.checkpointing.Periodic", "callbacks.checkpoints._target_",
     "Periodic"),
    ("callbacks.checkpoints.best._target_=nomodule.Best", "callbacks.checkpoints.best._target_",
     "No module named 'nomodule'"),
    ("+logger.extra.csv._target_=lightning.pytorch.loggers.CSVLoger", "logger.extra.csv._target_",
     "CSVLoger"),
    ("trainer._target_=lightning.pytorch.Trainr", "trainer._target_", "Trainr"),
    (f"+callbacks.mine._target_={USER_CALLBACK} +callbacks.mine.pth=x", "+callbacks.mine.pth",
     "near matches: ['path']"),
    ("+trainer.max_epoch=3", "+trainer.max_epoch", "near matches: ['max_epochs'"),
    ("callbacks.pbt._enabled_=maybe", "callbacks.pbt._enabled_", "true or false"),
])
def test_a_bad_node_is_refused_before_any_process_starts(tmp_path, line, key, says):
    with pytest.raises(ConfigError) as info:
        check_command_line([*line.split(), f"train_dir={tmp_path / 'runs'}"], str(CONF_DIR))
    assert info.value.key == key and says in str(info.value), str(info.value)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("path,problem", [
    ("lightning.pytorch.loggers.CSVLogger", None),
    ("lightning.pytorch.Trainer", None),  # bound by an import in the package's __init__
    ("lightning.pytorch.callbacks.EarlyStopping", None),
    ("lightning.pytorch.loggers.CSVLoger", "module 'lightning.pytorch.loggers' has no attribute 'CSVLoger'"),
    ("lightning.Trainr", "module 'lightning' has no attribute 'Trainr'"),  # past its (guarded) star imports
    ("sf_hydra.learner.callbacks", "'sf_hydra.learner.callbacks' is a module, not a class or a function"),
    ("sf_hydra.learner.nope.Mine", "No module named 'sf_hydra.learner.nope'"),
    ("nomodule.Mine", "No module named 'nomodule'"),
])
def test_targets_are_found_in_the_files_without_importing_them(path, problem):
    code = ("import sys\nfrom sf_hydra.app.trainer_parts import missing_without_import\n"
            f"print(repr(missing_without_import({path!r})), 'lightning' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"{problem!r} False"


def test_train_refuses_a_bad_callback_target_before_the_run_folder_is_touched(tmp_path):
    cfg = make_cfg(tmp_path, "+callbacks.mine._target_=tests.helpers.nope.Mine")
    with pytest.raises(ConfigError, match=r"^callbacks\.mine\._target_="):
        train(cfg)
    assert not (tmp_path / "test").exists()


def test_train_py_refuses_a_bad_callback_target_without_importing_lightning(tmp_path):
    proc = subprocess.run([sys.executable, "-X", "importtime", str(REPO_ROOT / "train.py"),
                           "+callbacks.mine._target_=my_callbacks.Mine", f"train_dir={tmp_path}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    framed = [line for line in proc.stderr.splitlines() if line.startswith("bad config:")]
    assert framed and framed[0].startswith("bad config: callbacks.mine._target_='my_callbacks.Mine' is not allowed")
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "lightning" not in imported
    assert not any(tmp_path.iterdir())


def test_a_good_node_on_the_command_line_passes(tmp_path):
    check_command_line([f"+callbacks.mine._target_={USER_CALLBACK}", "+callbacks.mine.path=x",
                        "+callbacks.mine._enabled_=false", "+trainer.gradient_clip_val=0.5",
                        f"train_dir={tmp_path / 'runs'}"], str(CONF_DIR))


def test_what_only_the_build_can_tell_is_refused_with_the_key(tmp_cfg, tmp_path):
    cfg = tmp_cfg("+callbacks.mine._target_=tests.helpers.user_callbacks.NotACallback")
    with pytest.raises(ConfigError, match=r"^callbacks\.mine\._target_=.*a lightning.pytorch.Callback"):
        build_trainer(cfg, tmp_path / "run", resuming=False)
    cfg = tmp_cfg(f"+callbacks.mine._target_={USER_CALLBACK}", "+callbacks.mine.pth=x")  # YAML: no + check
    with pytest.raises(ConfigError, match=r"^callbacks\.mine\._target_=.*unexpected keyword argument 'pth'"):
        build_trainer(cfg, tmp_path / "run", resuming=False)
    cfg = tmp_cfg("+logger.extra.mine._target_=tests.helpers.user_callbacks.NotACallback")
    with pytest.raises(ConfigError, match=r"^logger\.extra\.mine\._target_=.*a lightning.pytorch.loggers.Logger"):
        build_trainer(cfg, tmp_path / "run", resuming=False)
    with pytest.raises(ConfigError, match=r"^callbacks=.*exactly one node of StopConditions"):
        build_trainer(tmp_cfg("~callbacks.stop_conditions"), tmp_path / "run", resuming=False)


def test_a_run_saved_before_these_groups_resumes(tmp_cfg):
    """An older sf_hydra saved config.yaml without `trainer`, `callbacks` and `logger.extra`."""
    cfg = tmp_cfg()
    saved = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    with open_dict(saved):
        for key in ("trainer", "callbacks"):
            saved.pop(key)
        saved.logger.pop("extra")
    refused, _, _ = config_differences(cfg, saved)
    assert refused == []
