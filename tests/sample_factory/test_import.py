"""`python -m sf_hydra.app.import_sf_config`: a Sample Factory run's saved config.json (real ones,
tests/data/sf_cartpole_config.json: train_gym_env CartPole-v1, 2000 steps; sf_doom_my_way_home_config.json:
train_vizdoom doom_my_way_home, 1M frames, with its Doom flags) -> a preset of ours."""

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from sf_hydra.app.import_sf_config import main
from sf_hydra.config import register_configs, validate
from sf_hydra.config.aliases import apply_aliases
from tests.conftest import CONF_DIR, REPO_ROOT

SF_CONFIG = REPO_ROOT / "tests" / "data" / "sf_cartpole_config.json"
SF_DOOM_CONFIG = REPO_ROOT / "tests" / "data" / "sf_doom_my_way_home_config.json"


def _compose_with(folder, *overrides):
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("train", overrides=apply_aliases([f"hydra.searchpath=[file://{folder}]", *overrides]))
    finally:
        GlobalHydra.instance().clear()


def test_imported_preset_composes_validates_and_holds_the_run(tmp_path, capsys):
    out = tmp_path / "experiments" / "sf_cartpole.yaml"
    assert main([str(SF_CONFIG), "--out", str(out)]) == 0
    assert "--train_dir=" in capsys.readouterr().err  # not imported: said so
    cfg = _compose_with(tmp_path, "+experiment=sf_cartpole")
    validate(cfg)
    assert cfg.env.id == "CartPole-v1" and cfg.experiment == "sf_cartpole" and cfg.seed == 7
    assert cfg.algo.learning_rate == 0.0003 and cfg.algo.lr_schedule == "constant"
    assert cfg.hardware.num_envs_per_worker == 4 and cfg.hardware.worker_num_splits == 2
    assert cfg.train_for_env_steps == 2000 and list(cfg.model.encoder_mlp_layers) == [512, 512]
    assert cfg.train_until_avg_return is None  # SF's run had no early stop; gym/cartpole's 480 would be one
    # Its loss weights and initialization mean what they meant there: SF's value loss is ours (no 1/2),
    # and its action head took policy_init_gain (1.0), where our default head gain is 0.01.
    assert cfg.algo.value_loss_coeff == 0.5 and cfg.model.action_head_init_gain == 1.0
    text = out.read_text()
    assert "num_workers" not in text and "gae_lambda" not in text, "only values that differ from ours"
    assert cfg.algo.gamma == 0.99 and cfg.algo.batch_size == 1024  # SF's gamma (gym/cartpole: 0.999); its batch: ours


def test_overrides_format(capsys):
    assert main([str(SF_CONFIG), "--format", "overrides"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("python train.py env=gym/cartpole ") and "seed=7" in line


def test_flags_it_cannot_honour_are_refused_by_name(tmp_path, capsys):
    sf_cfg = json.loads(SF_CONFIG.read_text())
    sf_cfg.update(num_agents=2, default_niceness=5)  # a Doom script's own flag; a replaced mechanism
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(sf_cfg))
    assert main([str(bad), "--out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err
    assert "--num_agents=2" in err and "--default_niceness=5" in err
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.parametrize("env, group", [("doom_basic", "doom/basic"), ("Acrobot-v1", "gym/acrobot")])
def test_env_picks_our_config(tmp_path, capsys, env, group):
    sf_cfg = json.loads(SF_CONFIG.read_text())
    sf_cfg["env"] = env
    path = tmp_path / "config.json"
    path.write_text(json.dumps(sf_cfg))
    assert main([str(path)]) == 0
    assert f"override /env: {group}" in capsys.readouterr().out


def test_a_doom_run_imports_with_its_view_and_doom_defaults(tmp_path, capsys):
    out = tmp_path / "experiments" / "sf_doom.yaml"
    assert main([str(SF_DOOM_CONFIG), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    for dropped in ("--num_agents=-1", "--num_bots=-1", "--timelimit=None", "--fps=35", "--eval_env_frameskip=1"):
        assert dropped in err, dropped
    cfg = _compose_with(tmp_path, "+experiment=sf_doom")
    validate(cfg)
    assert cfg.env.name == "doom_my_way_home" and cfg.seed == 3
    # SF's view: 160x120 rendered (no --wide_aspect_ratio), resized to --res_w x --res_h = 128x72
    assert (cfg.env.resolution, cfg.env.downsample, list(cfg.env.resize)) == ("160x120", 1, [128, 72])
    # its Doom defaults (doom_override_defaults) and its heartbeat_reporting_interval of 600
    assert cfg.algo.exploration_loss == "symmetric_kl" and cfg.algo.ppo_clip_value == 0.2
    assert cfg.hardware.worker_stall_timeout_sec == 600
    assert cfg.env.num_agents == 1 and cfg.env.episode_timeout is None  # -1 / None: the scenario's own


def test_an_imported_doom_view_renders_sf_frames(tmp_path):
    pytest.importorskip("vizdoom", reason="the doom extra (vizdoom) is not installed")
    from sf_hydra.envs import make_env

    assert main([str(SF_DOOM_CONFIG), "--out", str(tmp_path / "experiments" / "sf_doom.yaml")]) == 0
    cfg = _compose_with(tmp_path, "+experiment=sf_doom")
    env = make_env(cfg.env, seed=0)
    try:
        obs, _ = env.reset(seed=0)
        obs, *_ = env.step(env.action_space.sample())
    finally:
        env.close()
    pixels = obs["obs"] if isinstance(obs, dict) else obs
    assert pixels.shape == (3, 72, 128) and pixels.dtype.name == "uint8"
