"""`python enjoy.py experiment=<name>`: loads a trained run's config and checkpoint, plays
episodes with its policy, writes eval.json and videos (mp4 or GIF); bad input is named before anything runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from sf_hydra.app.train import train
from tests.conftest import REPO_ROOT, make_cfg


def gif_frames(path, frame_ms: int = 20) -> int:
    """Frames shown in a GIF whose frames last `frame_ms` (CartPole's 50 fps), counting Pillow's merges of
    identical consecutive frames (their durations add)."""
    with Image.open(path) as gif:
        durations = []
        for i in range(gif.n_frames):
            gif.seek(i)
            durations.append(gif.info["duration"])
    return round(sum(durations) / frame_ms)


def video_frames(path) -> int:
    """Frames in a saved episode video, decoded from the file (mp4 through imageio-ffmpeg, or GIF)."""
    if Path(path).suffix == ".gif":
        return gif_frames(path)
    import imageio.v2 as imageio

    with imageio.get_reader(path) as reader:
        return sum(1 for _ in reader)


def enjoy(tmp_path, *overrides, hide=None):
    """enjoy.py in a subprocess; `hide`: packages it must run without (tests/helpers/hide_modules.py)."""
    script = [str(REPO_ROOT / "enjoy.py")]
    if hide:
        script = ["-m", "tests.helpers.hide_modules", ",".join(hide), *script]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, *script, f"train_dir={tmp_path}", *overrides]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def cartpole_run(short_cartpole_run):
    return short_cartpole_run[0]  # the shared run (tests/conftest.py); enjoy writes only under its enjoy/


@pytest.mark.slow
def test_enjoy_plays_episodes_and_records_them(cartpole_run):
    result = enjoy(cartpole_run, "experiment=test", "episodes=2", "video=true", "video_format=gif",
                   "max_episode_steps=30")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((cartpole_run / "test" / "enjoy" / "eval.json").read_text())
    assert report["checkpoint"].endswith("last.ckpt")
    assert len(report["episodes"]) == 2
    for episode in report["episodes"]:
        assert 1 <= episode["length"] <= 30
        assert gif_frames(episode["video"]) == episode["length"]
        with Image.open(episode["video"]) as gif:
            assert gif.size[0] > 100
    assert (cartpole_run / "test" / "enjoy" / "enjoy.log").exists()


@pytest.mark.slow
def test_enjoy_saves_mp4_capped_at_video_frames(cartpole_run):
    """With imageio-ffmpeg (the `video` extra) a video is an mp4; video_frames caps its length while the
    episode plays on (its length and return are the whole episode's)."""
    result = enjoy(cartpole_run, "experiment=test", "episodes=1", "video=true", "video_frames=6",
                   "max_episode_steps=40")
    assert result.returncode == 0, result.stderr[-3000:]
    episode = json.loads((cartpole_run / "test" / "enjoy" / "eval.json").read_text())["episodes"][0]
    assert episode["video"].endswith(".mp4") and episode["length"] > 6  # a CartPole game lasts 8 steps or more
    assert video_frames(episode["video"]) == 6


@pytest.mark.slow
def test_enjoy_takes_a_sample_factory_command_line(cartpole_run):
    """SF's enjoy flags, as its scripts take them (a switch without a value, 1e9 for no limit), with the
    training flags it repeats: translated, the equivalent command printed, the episodes played."""
    result = enjoy(cartpole_run, "--env=CartPole-v1", "--algo=APPO", "--experiment=test", "--save_video",
                   "--max_num_episodes=2", "--eval_deterministic=True", "--video_frames=1e9", "--no_render",
                   "--num_workers=8", "max_episode_steps=20")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "experiment=test video=true episodes=2 deterministic=true" in result.stderr
    assert "--num_workers=8: dropped (a training flag" in result.stderr
    report = json.loads((cartpole_run / "test" / "enjoy" / "eval.json").read_text())
    assert len(report["episodes"]) == 2 and all(Path(e["video"]).exists() for e in report["episodes"])
    refused = enjoy(cartpole_run, "--experiment=test", "--max_num_frames=100")
    assert refused.returncode == 2 and "--max_num_frames=100 is not allowed" in refused.stderr


@pytest.mark.slow
def test_enjoy_without_ffmpeg_falls_back_to_gif_and_names_mp4(cartpole_run):
    """Without imageio-ffmpeg, auto saves GIFs; asking for mp4 is refused by name before anything plays."""
    result = enjoy(cartpole_run, "experiment=test", "episodes=1", "video=true", "max_episode_steps=5",
                   hide=["imageio_ffmpeg"])
    assert result.returncode == 0, result.stderr[-3000:]
    episode = json.loads((cartpole_run / "test" / "enjoy" / "eval.json").read_text())["episodes"][0]
    assert episode["video"].endswith(".gif") and gif_frames(episode["video"]) == episode["length"]
    refused = enjoy(cartpole_run, "experiment=test", "video=true", "video_format=mp4", hide=["imageio_ffmpeg"])
    message = refused.stdout + refused.stderr
    assert refused.returncode == 2 and "video_format='mp4'" in message and "imageio-ffmpeg" in message


@pytest.mark.slow
def test_enjoy_names_the_extra_a_video_needs(cartpole_run):
    """On an install without pygame (`pip install .`, no render extra) CartPole's frames cannot be drawn:
    one line names the extra to install, no traceback."""
    result = enjoy(cartpole_run, "experiment=test", "episodes=1", "video=true", "max_episode_steps=5",
                   hide=["pygame"])
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in out, out[-3000:]
    lines = [x for x in out.splitlines() if "video=true: drawing CartPole-v1 needs pygame" in x]
    assert len(lines) == 1 and 'pip install ".[render]"' in lines[0], out[-3000:]


@pytest.mark.slow
def test_enjoy_names_a_missing_run_and_creates_nothing(cartpole_run):
    result = enjoy(cartpole_run, "experiment=nope")
    assert result.returncode == 2
    assert "experiment='nope'" in result.stdout + result.stderr and "test" in result.stdout + result.stderr
    assert not (cartpole_run / "nope").exists()


@pytest.mark.slow
def test_enjoy_names_a_missing_checkpoint(cartpole_run):
    result = enjoy(cartpole_run, "experiment=test", "checkpoint=nope")
    assert result.returncode == 2
    assert "last.ckpt" in result.stdout + result.stderr


@pytest.mark.slow
def test_enjoy_names_what_an_older_runs_config_lacks(cartpole_run):
    """A run saved before env families and networks were dotted paths is refused by name."""
    import shutil

    from omegaconf import OmegaConf

    old = cartpole_run / "old"
    shutil.copytree(cartpole_run / "test", old)
    cfg = OmegaConf.load(old / "config.yaml")
    del cfg.env["factory"], cfg.model["_target_"]
    OmegaConf.save(cfg, old / "config.yaml")
    result = enjoy(cartpole_run, "experiment=old")
    assert result.returncode == 2
    out = result.stdout + result.stderr
    assert "experiment='old'" in out and "env.factory / model._target_" in out and "Traceback" not in out


@pytest.mark.slow
def test_enjoy_doom_pixels_and_rnn(tmp_path):
    pytest.importorskip("vizdoom", reason="vizdoom is not installed (pip install -e '.[doom]')")
    train(make_cfg(tmp_path, "env=doom/basic", "hardware.num_workers=1", "hardware.num_envs_per_worker=2",
                   "algo.rollout=32", "algo.batch_size=64", "model.rnn_size=64", "model.encoder_conv_mlp_layers=[64]",
                   "train_for_env_steps=600"))
    result = enjoy(tmp_path, "experiment=test", "episodes=1", "video=true", "max_episode_steps=20",
                   "deterministic=true")
    assert result.returncode == 0, result.stderr[-3000:]
    episode = json.loads((tmp_path / "test" / "enjoy" / "eval.json").read_text())["episodes"][0]
    assert video_frames(episode["video"]) == episode["length"]


@pytest.mark.slow
def test_enjoy_plays_any_policy_of_a_several_policy_run(tmp_path):
    """A two-policy run: each policy plays on its own (deterministic play of two differently
    trained policies), and a policy the run does not have is refused by name."""
    train(make_cfg(tmp_path, "experiment=two", "algo.num_policies=2", "train_for_env_steps=4000"))
    returns = {}
    for k in (0, 1):
        result = enjoy(tmp_path, "experiment=two", "episodes=2", f"policy={k}", "deterministic=true")
        assert result.returncode == 0, result.stderr[-3000:]
        returns[k] = json.loads((tmp_path / "two" / "enjoy" / "eval.json").read_text())["mean_return"]
    assert all(r > 0 for r in returns.values())
    bad = enjoy(tmp_path, "experiment=two", "policy=2")
    message = bad.stdout + bad.stderr
    assert bad.returncode == 2 and "policy=2" in message and "0 to 1" in message


@pytest.mark.slow
def test_a_run_saved_by_an_older_sf_hydra_plays(cartpole_run, tmp_path):
    """enjoy.py on a run whose config.yaml lacks the keys added since (the env's pixel format and episode
    counter, the policies, W&B): the config is migrated when read and the run plays."""
    from tests.helpers.older_config import saved_without

    saved_without(cartpole_run / "test", tmp_path / "test")
    result = enjoy(tmp_path, "experiment=test", "episodes=1", "max_episode_steps=20")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(json.loads((tmp_path / "test" / "enjoy" / "eval.json").read_text())["episodes"]) == 1
