"""A resumed run keeps its saved config.yaml: train.py takes it as the base and applies only the overrides typed
now; budgets, logging, hardware and checkpoint keys may change, any other typed difference is refused before any
process starts, every one at once, naming the key and both values (train(), train.py, and each run of a
--multirun sweep); restart_behavior=restart/overwrite starts anew. A run that already reached its budget is not
trained on: train.py says it is finished, how far it went and how to train more or start over."""

import subprocess
import sys

import pytest
import yaml
from omegaconf import OmegaConf

from sf_hydra.app.checks import check_command_line
from sf_hydra.app.resume_config import check_resume_config, config_differences
from sf_hydra.app.train import train
from sf_hydra.config import ConfigError
from tests.conftest import CONF_DIR, FAST_OVERRIDES, REPO_ROOT, make_cfg

ONE = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.batch_size=32")


@pytest.mark.slow
def test_changed_learning_rate_is_refused_and_a_larger_budget_continues(tmp_path):
    run = tmp_path / "test"
    first = train(make_cfg(tmp_path, *ONE, "train_for_env_steps=1500"))
    saved_lr = yaml.safe_load((run / "config.yaml").read_text())["algo"]["learning_rate"]
    last = run / "checkpoints" / "last.ckpt"
    before = (last.stat().st_mtime_ns, (run / "config.yaml").read_text())

    with pytest.raises(ConfigError) as info:
        train(make_cfg(tmp_path, *ONE, "train_for_env_steps=3000", "algo.learning_rate=0.007"))
    err = info.value
    assert err.key == "algo.learning_rate" and err.value == 0.007
    msg = str(err)
    assert repr(saved_lr) in msg and "restart_behavior=restart" in msg and "overwrite" in msg, msg
    assert "algo.optimizer.lr" in msg  # the interpolated copy is listed after the key the user set
    assert (last.stat().st_mtime_ns, (run / "config.yaml").read_text()) == before, "a refused run changes nothing"

    # Budgets, hardware, logging and checkpoint keys may change: the run continues from its counters.
    second = train(make_cfg(tmp_path, "hardware.num_workers=2", "hardware.num_envs_per_worker=2",
                            "algo.batch_size=32", "train_for_env_steps=3000", "logger.log_interval_sec=2",
                            "save_every_sec=30", "keep_checkpoints=3", "save_best_metric=len"))
    assert second["env_steps"] >= 3000 and second["policy_version"] > first["policy_version"]
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["train_for_env_steps"] == 3000 and saved["hardware"]["num_workers"] == 2
    assert saved["algo"]["learning_rate"] == saved_lr

    # restart_behavior=restart takes the new config (the check does not apply).
    check_resume_config(make_cfg(tmp_path, *ONE, "algo.learning_rate=0.005", "restart_behavior=restart"), run)


@pytest.mark.parametrize("override, key", [
    ("seed=7", "seed"), ("model.encoder_mlp_layers=[32]", "model.encoder_mlp_layers"),
    ("+env.kwargs.sutton_barto_reward=true", "env.kwargs.sutton_barto_reward"), ("algo=ppo", "algo.async_rl"),
    ("selfplay.latest_prob=0.2", "selfplay.latest_prob"), ("algo.num_policies=2", "algo.num_policies"),
    ("hardware.devices=2", "hardware.devices"), ("hardware.num_nodes=2", "hardware.num_nodes"),
    ("hardware.precision=bf16-mixed", "hardware.precision"),
    ("hardware.learner_precision=bf16", "hardware.learner_precision"),
])
def test_what_the_run_computes_may_not_change(tmp_path, override, key):
    saved = make_cfg(tmp_path)
    refused, _, _ = config_differences(make_cfg(tmp_path, override), OmegaConf.create(
        OmegaConf.to_yaml(saved, resolve=True)))
    assert refused and refused[0][0] == key, refused


def test_the_run_place_new_schema_keys_and_resumable_keys_pass(tmp_path):
    saved = OmegaConf.create(OmegaConf.to_yaml(make_cfg(tmp_path), resolve=True))
    del saved.model["tanh_squash_actions"]  # saved by an sf_hydra without that key: it takes its default
    saved.algo["a_key_removed_since"] = 1  # a key the schema no longer has: ignored
    cfg = make_cfg(tmp_path / "elsewhere", "experiment=moved", "sweep_name=other", "train_for_seconds=60",
                   "train_until_avg_return=100", "logger.stats_avg=20", "hardware.serial_mode=true",
                   "save_milestones_sec=600", "load_checkpoint_kind=best", "restart_behavior=resume")
    refused, accepted, ignored = config_differences(cfg, saved)
    assert not refused, refused
    assert {"train_for_seconds", "logger.stats_avg", "hardware.serial_mode", "run_dir"} <= {k for k, _, _ in accepted}
    assert set(ignored) == {"model.tanh_squash_actions", "algo.a_key_removed_since"}


@pytest.mark.slow
def test_train_py_refuses_before_writing_into_the_run_folder(tmp_path):
    train(make_cfg(tmp_path, *ONE, "train_for_env_steps=1000"))
    hydra_dir = tmp_path / "test" / ".hydra"
    hydra_dir.mkdir(exist_ok=True)
    (hydra_dir / "overrides.yaml").write_text("kept\n")
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), f"train_dir={tmp_path}", "experiment=test", *FAST_OVERRIDES,
           *ONE, "train_for_env_steps=2000", "seed=3"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "bad config: seed=3 is not allowed: 0, as saved in" in result.stderr, result.stderr[-2000:]
    assert (hydra_dir / "overrides.yaml").read_text() == "kept\n"


@pytest.mark.long  # kept out of CI's 30 minutes (see pyproject.toml); run with -m long
def test_each_sweep_run_resumes_with_its_own_config(tmp_path):
    def sweep(*overrides):
        cmd = [sys.executable, str(REPO_ROOT / "train.py"), "--multirun", f"train_dir={tmp_path}", "sweep_name=s",
               *FAST_OVERRIDES, *ONE, "seed=1", *overrides]
        return subprocess.run(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=300)

    assert sweep("train_for_env_steps=1000").returncode == 0
    changed = sweep("train_for_env_steps=2000", "algo.gamma=0.9")
    assert changed.returncode != 0
    assert changed.stdout.count("bad config: algo.gamma=0.9 is not allowed: 0.999, as saved in") == 1, \
        changed.stdout[-3000:]
    more = sweep("train_for_env_steps=2000")
    assert more.returncode == 0, more.stdout[-3000:]
    assert more.stdout.count("resuming from last.ckpt") == 1, more.stdout[-3000:]


def _edit_saved(run, **changes):
    """The run's saved config.yaml with `changes` ({"algo.gae_lambda": 0.9}): as an older sf_hydra (other
    defaults) or an earlier command line would have saved it."""
    saved = OmegaConf.load(run / "config.yaml")
    for key, value in changes.items():
        OmegaConf.update(saved, key, value, merge=False)
    (run / "config.yaml").write_text(OmegaConf.to_yaml(saved))


@pytest.mark.slow
def test_resume_takes_the_saved_config_and_only_the_overrides_typed_now(tmp_path):
    run = tmp_path / "test"
    train(make_cfg(tmp_path, *ONE, "train_for_env_steps=1000"))
    # Saved with a gae_lambda and a learning rate that are no longer the defaults: a new budget alone resumes.
    _edit_saved(run, **{"algo.gae_lambda": 0.9, "algo.learning_rate": 0.003, "algo.optimizer.lr": 0.003})
    argv = [f"train_dir={tmp_path}", "experiment=test", "train_for_env_steps=2000", "hardware.num_workers=2"]
    checked = check_command_line(argv, str(CONF_DIR))
    cfg = checked.cfg
    assert cfg.algo.gae_lambda == 0.9 and cfg.algo.learning_rate == 0.003 and cfg.algo.optimizer.lr == 0.003
    assert cfg.train_for_env_steps == 2000 and cfg.hardware.num_workers == 2  # typed now: applied
    assert cfg.algo.batch_size == 32 and cfg.hardware.num_envs_per_worker == 2  # not typed: as saved (ONE)
    summary = train(cfg, checked)
    assert summary["env_steps"] >= 2000
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["algo"]["gae_lambda"] == 0.9 and saved["train_for_env_steps"] == 2000

    # A typed key that a resume may not change is refused, even where its value is today's default; every
    # such override at once, a group option's keys named with it.
    with pytest.raises(ConfigError) as info:
        check_command_line([*argv, "algo.gae_lambda=0.95", "seed=4", "algo=ppo"], str(CONF_DIR))
    err = info.value
    assert (err.key, err.value) == ("algo.gae_lambda", 0.95), err
    assert "0.9, as saved in" in str(err) and "seed=4 (saved: 0)" in str(err), err
    assert "algo.async_rl=False (saved: True, from algo=ppo)" in str(err), err
    # A group option that picks what the run was saved with (env=gym/cartpole) is no change.
    assert check_command_line([*argv, "env=gym/cartpole"], str(CONF_DIR)).cfg.algo.gae_lambda == 0.9


@pytest.mark.slow
def test_a_resume_conflict_is_refused_before_anything_heavy_is_imported(tmp_path):
    train(make_cfg(tmp_path, *ONE, "train_for_env_steps=1000"))
    cmd = [sys.executable, "-X", "importtime", str(REPO_ROOT / "train.py"), f"train_dir={tmp_path}",
           "experiment=test", "algo.gamma=0.9", "model.encoder_mlp_layers=[32]"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    line = next(x for x in result.stderr.splitlines() if x.startswith("bad config:"))
    assert line.startswith("bad config: algo.gamma=0.9 is not allowed: 0.999, as saved in"), line
    assert "model.encoder_mlp_layers=[32] (saved: [64, 64])" in line, line
    imported = {x.split("|")[-1].strip() for x in result.stderr.splitlines() if x.startswith("import time:")}
    assert "sf_hydra.app.cli" in imported and not {"torch", "lightning"} & imported


def _train_py(tmp_path, *overrides):
    cmd = [sys.executable, str(REPO_ROOT / "train.py"), f"train_dir={tmp_path}", "experiment=test", *overrides]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_finished_run_says_so_and_a_larger_budget_continues_it(tmp_path):
    run = tmp_path / "test"
    train(make_cfg(tmp_path, *ONE, "train_for_env_steps=1000", "train_until_avg_return=5", "logger.stats_avg=10"))
    summary = yaml.safe_load((run / "summary.json").read_text())
    assert summary["stop_reason"] == "train_until_avg_return=5 reached", summary
    before = (run / "checkpoints" / "last.ckpt").stat().st_mtime_ns

    again = _train_py(tmp_path, "logger.log_interval_sec=2")  # a new logging setting: the run is still finished
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"run folder {run} is finished: {summary['env_steps']} env steps" in again.stdout, again.stdout
    assert "budget reached: train_until_avg_return=5 (avg return" in again.stdout, again.stdout
    assert "train_until_avg_return=null" in again.stdout and "restart_behavior=restart" in again.stdout
    assert (run / "checkpoints" / "last.ckpt").stat().st_mtime_ns == before, "a finished run is not trained on"
    assert not (run / ".hydra").exists(), "nothing is written for a finished run"

    more = _train_py(tmp_path, "train_until_avg_return=null", "train_for_env_steps=1500")  # a larger budget
    assert more.returncode == 0, more.stderr[-2000:]
    assert yaml.safe_load((run / "summary.json").read_text())["env_steps"] >= 1500
    done = _train_py(tmp_path)  # its saved budget (1500) now reached
    assert "budget reached: train_for_env_steps=1500" in done.stdout and "train_for_env_steps=3000" in done.stdout


@pytest.mark.slow
def test_a_run_saved_with_older_callback_arguments_resumes_with_todays_and_keeps_the_users_own(tmp_path):
    """A run saved by an sf_hydra whose built-in callbacks took other arguments (the evaluation's eval.* keys one
    by one) resumes with today's nodes; a callback the run's own command line added is kept whole."""
    run = tmp_path / "test"
    marker = tmp_path / "user_callback.json"
    train(make_cfg(tmp_path, *ONE, "train_for_env_steps=1000",
                   "+callbacks.mine._target_=tests.helpers.user_callbacks.WriteOnTrainEnd",
                   f"+callbacks.mine.path={marker}", "+callbacks.mine.note=kept"))
    _edit_saved(run, **{"callbacks.evaluation.episodes": 10, "callbacks.evaluation.every_sec": 0,
                        "callbacks.opponent_pool.pool_size": 0, "callbacks.summaries.log_interval_sec": 5.0})
    marker.unlink()
    argv = [f"train_dir={tmp_path}", "experiment=test", "train_for_env_steps=2000"]
    checked = check_command_line(argv, str(CONF_DIR))
    assert "episodes" not in checked.cfg.callbacks.evaluation and "pool_size" not in checked.cfg.callbacks.opponent_pool
    assert checked.cfg.callbacks.mine.note == "kept"
    summary = train(checked.cfg, checked)
    assert summary["env_steps"] >= 2000
    assert '"note": "kept"' in marker.read_text()


@pytest.mark.slow
def test_resuming_with_other_learner_ranks_is_refused_naming_the_key(tmp_path):
    run = tmp_path / "test"
    train(make_cfg(tmp_path, *ONE, "train_for_env_steps=1000"))
    before = (run / "checkpoints" / "last.ckpt").stat().st_mtime_ns
    with pytest.raises(ConfigError) as info:
        train(make_cfg(tmp_path, *ONE, "train_for_env_steps=3000", "hardware.devices=2"))
    assert info.value.key == "hardware.devices" and info.value.value == 2
    assert "1, as saved" in str(info.value) and "how many frames a learner step learns from" in str(info.value)
    assert (run / "checkpoints" / "last.ckpt").stat().st_mtime_ns == before
    assert not (run / "ranks").exists()  # no rank started


def test_a_run_of_another_env_family_resumes_with_its_own_env_keys(tmp_path):
    """`train.py experiment=<a Doom run>` composes the default env (gym): the saved run's env node is of its own
    family's schema, so its keys (resolution, measurements, the game's settings) are taken as saved, not left out
    as fields gym's schema lacks (the Doom family then found no env.measurements)."""
    from sf_hydra.app.resume_config import save_config

    run = tmp_path / "test"
    (run / "checkpoints").mkdir(parents=True)
    cfg = make_cfg(tmp_path, "env=doom/basic", "env.resolution=160x120", "+env.kwargs.render_hud=true")
    save_config(cfg, run)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")  # a resume: a saved config and a checkpoint file
    checked = check_command_line([f"train_dir={tmp_path}", "experiment=test", "train_for_env_steps=9000"],
                                 str(CONF_DIR))
    env = checked.cfg.env
    assert env.family == "doom" and env.factory["_target_"].endswith("DoomFamily")
    assert env.resolution == "160x120" and list(env.measurements) == [] and env.kwargs["render_hud"] is True
    assert checked.cfg.train_for_env_steps == 9000


@pytest.mark.parametrize("saved_value, resumed", [(None, "per_episode"), ("fixed", "fixed"), ("auto", "auto")])
def test_a_run_saved_before_policy_assignment_resumes_as_it_behaved(tmp_path, saved_value, resumed):
    """algo.policy_assignment came with auto (fixed blocks of envs where they divide evenly): a several-policy
    run saved without the key drew each env's policy per episode, so it resumes with per_episode, not today's
    default; a run saved with the key keeps its value; typed now, the key is refused as any computing key."""
    from sf_hydra.app.resume_config import save_config

    run = tmp_path / "test"
    (run / "checkpoints").mkdir(parents=True)
    save_config(make_cfg(tmp_path, "algo.num_policies=2"), run)
    saved = OmegaConf.load(run / "config.yaml")
    if saved_value is None:
        del saved.algo["policy_assignment"]
    else:
        saved.algo.policy_assignment = saved_value
    (run / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    argv = [f"train_dir={tmp_path}", "experiment=test", "train_for_env_steps=9000"]
    assert str(check_command_line(argv, str(CONF_DIR)).cfg.algo.policy_assignment) == resumed


def test_a_run_saved_before_a_key_resumes_with_its_default_and_a_typed_change_is_refused(tmp_path):
    """A run saved without a key added since (its config migrated when read: sf_hydra.config.saved) ran with the
    key's default: it resumes with it, and a different value typed now changes what is trained, so it is
    refused naming the key and the default the run had."""
    from sf_hydra.app.resume_config import save_config

    run = tmp_path / "test"
    (run / "checkpoints").mkdir(parents=True)
    save_config(make_cfg(tmp_path), run)
    saved = OmegaConf.load(run / "config.yaml")
    del saved.model["tanh_squash_actions"]
    (run / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    argv = [f"train_dir={tmp_path}", "experiment=test", "train_for_env_steps=9000"]
    assert check_command_line(argv, str(CONF_DIR)).cfg.model.tanh_squash_actions is False
    with pytest.raises(ConfigError) as info:
        check_command_line([*argv, "model.tanh_squash_actions=true"], str(CONF_DIR))
    assert info.value.key == "model.tanh_squash_actions" and "False, as saved in" in str(info.value)
