"""A Sample Factory command line works as it is: `python train.py --env=CartPole-v1 --num_workers=2 ...`
is translated through the flag table, printed as our command and run."""

import subprocess
import sys

import pytest
import yaml

from sf_hydra.app.checks import check_command_line
from sf_hydra.app.sample_factory.translate import sf_defaults, sf_flags_in, translate_argv
from tests.conftest import CONF_DIR, REPO_ROOT

CONF = str(CONF_DIR)


def _train(tmp_path, *args, timeout=300):
    return subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)


def test_flags_translate_in_place_and_hydra_args_are_kept():
    argv = ["--env=doom_basic", "--num_workers", "8", "algo.gamma=0.9", "--batch_size=2048", "--cfg", "job",
            "--encoder_mlp_layers", "256", "128", "--device=gpu", "--log_to_file=True"]
    translation = translate_argv(argv, CONF)
    assert translation.argv == ["env=doom/basic", "hardware.num_workers=8", "algo.gamma=0.9",
                                "algo.batch_size=2048", "--cfg", "job", "model.encoder_mlp_layers=[256,128]",
                                "hardware.device=cuda"]
    assert translation.notes and "--log_to_file" in translation.notes[0]


def test_only_sample_factory_style_flags_trigger_it():
    assert not sf_flags_in(["--multirun", "-m", "--cfg", "job", "--config-dir", "x", "--help", "env=doom/basic"])
    assert sf_flags_in(["--multirun", "--env=doom_basic"])


def test_multirun_mixes_with_flags_and_sweeps():
    argv = translate_argv(["--multirun", "--env=CartPole-v1", "--seed=1,2", "--num_envs_per_worker", "4"], CONF).argv
    assert argv == ["--multirun", "env=gym/cartpole", "seed=1,2", "hardware.num_envs_per_worker=4"]
    assert check_command_line(argv, CONF) is None  # a sweep: composed and checked, no single run


@pytest.mark.parametrize("args, named", [
    (["--env=CartPole-v1", "--num_wrkers=4"], "--num_wrkers=4"),  # unknown: with close matches
    (["--env=doom_two_colors_easy"], "--env='doom_two_colors_easy'"),  # no config of ours
    (["--default_niceness=5"], "--default_niceness=5"),  # replaced: says by what
    (["--num_workers"], "--num_workers"),  # no value
])
def test_what_cannot_be_mapped_exits_2_naming_it(tmp_path, args, named):
    result = _train(tmp_path, *args, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert named in result.stderr and "bad config:" in result.stderr
    assert not any(tmp_path.iterdir()), "nothing is written for a refused command line"


@pytest.mark.parametrize("args, overrides", [
    # the view: three flags -> three keys together; a flag left out takes SF's default (128, 72, False)
    (["--res_w=96"], ["env.resolution=160x120", "env.downsample=1", "env.resize=[96,72]"]),
    (["--wide_aspect_ratio=True", "--res_h", "144", "--res_w=256"],
     ["env.resolution=256x144", "env.downsample=1", "env.resize=null"]),  # SF renders that size: no resize
    (["--timelimit=1.5"], ["env.episode_timeout=3150"]),  # minutes -> tics at 35 per second
    (["--num_bots=4", "--num_agents=-1"], ["env.num_bots=4"]),  # -1: the scenario's own
    (["--heartbeat_reporting_interval=600"], ["hardware.worker_stall_timeout_sec=600.0"]),
])
def test_doom_flags_translate(args, overrides):
    assert translate_argv(["--env=doom_basic", *args], CONF).argv == ["env=doom/basic", *overrides]


@pytest.mark.parametrize("args, named", [
    (["--env=CartPole-v1", "--res_w=96"], "--res_w=96 is not allowed: a flag of the doom env family (this run's: gym)"),
    (["--env=CartPole-v1", "--num_bots=2"], "--num_bots=2 is not allowed: a flag of the doom env family"),
    (["--env=doom_basic", "--num_humans=1"], "--num_humans=1 is not allowed: not applicable: humans"),
    (["--env=doom_basic", "--timelimit=0"], "--timelimit=0.0 is not allowed: minutes > 0"),
    (["-m", "--env=doom_basic", "--res_w=64,96"], "--res_w=64,96 is not allowed: one value"),
])
def test_doom_flags_refused_naming_the_flag(args, named):
    with pytest.raises(ValueError) as e:
        translate_argv(args, CONF)
    assert named in str(e.value)


def test_doom_flags_at_their_sf_defaults_are_dropped_for_other_envs():
    argv = ["--env=CartPole-v1", "--res_w=128", "--wide_aspect_ratio=False", "--num_agents=-1"]
    translation = translate_argv(argv, CONF)
    assert translation.argv == ["env=gym/cartpole"]
    assert "--res_w=128: dropped" in " ".join(translation.notes)  # said, not silent


def test_enjoy_flags_translate_for_enjoy_and_are_refused_for_training():
    argv = ["--env=doom_basic", "--experiment=x", "--train_dir=runs", "--save_video", "--max_num_episodes",
            "3", "--policy_index=1", "--video_frames=1e9", "--res_w=96", "--fps=35"]
    translation = translate_argv(argv, CONF, stage="enjoy")
    assert translation.argv == ["experiment=x", "train_dir=runs", "video=true", "episodes=3", "policy=1"]
    dropped = " ".join(translation.notes)
    assert all(f"--{f}=" in dropped for f in ("env", "video_frames", "res_w", "fps"))
    with pytest.raises(ValueError, match="--save_video=True is not allowed: an evaluation flag"):
        translate_argv(["--env=doom_basic", "--save_video"], CONF)
    assert translate_argv(["--env=doom_basic", "--fps=35", "--eval_deterministic=False"], CONF).argv == [
        "env=doom/basic"]


def test_unknown_flag_lists_close_matches():
    with pytest.raises(ValueError, match="--num_workers"):
        translate_argv(["--num_wrkers=4"], CONF)


def test_prints_the_equivalent_command(tmp_path):
    result = _train(tmp_path, "--env=CartPole-v1", "--seed=5", "--cfg", "job", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "the same command: python train.py env=gym/cartpole seed=5 train_until_avg_return=null --cfg job" \
        in result.stderr
    assert yaml.safe_load(result.stdout)["seed"] == 5


def test_what_the_line_leaves_unsaid_stops_as_in_sample_factory(tmp_path):
    """SF has no early stop at an average return: a translated line runs to its budget (gym/cartpole's
    config would stop at 480), and the one budget of ours that differs from SF's default is named once."""
    result = _train(tmp_path, "--env=CartPole-v1", "--train_for_env_steps=300000", "--cfg", "job", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    cfg = yaml.safe_load(result.stdout)
    assert cfg["train_until_avg_return"] is None and cfg["train_for_env_steps"] == 300000
    assert result.stderr.count("note: train_until_avg_return=null: Sample Factory has no early stop") == 1
    assert "train_for_env_steps=500000" not in result.stderr  # the line set it

    unsaid = sf_defaults(["env=gym/cartpole", "seed=1"], CONF)
    assert unsaid.argv == ["env=gym/cartpole", "seed=1", "train_until_avg_return=null"]
    assert any(n.startswith("train_for_env_steps=500000: env cartpole's budget (Sample Factory's default: "
                            "10000000000") for n in unsaid.notes), unsaid.notes


def test_an_early_stop_the_line_sets_is_kept():
    kept = sf_defaults(["env=gym/cartpole", "train_until_avg_return=400", "train_for_env_steps=1000"], CONF)
    assert kept.argv == ["env=gym/cartpole", "train_until_avg_return=400", "train_for_env_steps=1000"]
    assert kept.notes == []


@pytest.mark.slow
def test_sample_factory_command_line_trains_cartpole(tmp_path):
    result = _train(tmp_path, "--env=CartPole-v1", "--train_for_env_steps=2000", "--num_workers=2",
                    "--num_envs_per_worker", "4", "--rollout=16", "--batch_size=128", "--experiment=sf",
                    f"--train_dir={tmp_path}", "--seed=3", "--learning_rate=0.0005", "--use_rnn=False")
    assert result.returncode == 0, result.stderr[-3000:]
    cfg = yaml.safe_load((tmp_path / "sf" / "config.yaml").read_text())
    assert cfg["env"]["id"] == "CartPole-v1" and cfg["seed"] == 3 and cfg["train_for_env_steps"] == 2000
    assert cfg["train_until_avg_return"] is None  # Sample Factory's: no early stop
    assert cfg["hardware"]["num_envs_per_worker"] == 4 and cfg["algo"]["rollout"] == 16
    assert cfg["algo"]["learning_rate"] == 0.0005 and cfg["model"]["use_rnn"] is False
    assert (tmp_path / "sf" / "summary.json").is_file()
