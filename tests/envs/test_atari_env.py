"""The atari env family against the real ALE (ROMs ship with ale_py; no mocks)."""

import numpy as np
import pytest

pytest.importorskip("ale_py", reason="the atari env family needs ale-py (pip install 'sf_hydra[atari]')")
pytest.importorskip("cv2", reason="gymnasium's AtariPreprocessing needs OpenCV (pip install opencv-python-headless)")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from sf_hydra.app.train import check_config  # noqa: E402
from sf_hydra.config import ConfigError  # noqa: E402
from sf_hydra.envs.atari.family import make_atari_env  # noqa: E402
from sf_hydra.envs.atari.games import check_game, game_ids  # noqa: E402
from sf_hydra.envs.atari.schema import AtariEnvConfig  # noqa: E402
from sf_hydra.envs.atari.wrappers import GAME_CONTINUES  # noqa: E402
from tests.conftest import compose_cfg  # noqa: E402

NOOP = 0


def atari_cfg(game="pong", **overrides):
    return OmegaConf.structured(AtariEnvConfig(name=f"atari_{game}", id=game, **overrides))


def make(game="pong", seed=0, **overrides):
    return make_atari_env(atari_cfg(game, **overrides), seed=seed)


def play_until_done(env, action=NOOP, limit=20_000):
    """Steps with one action until the episode ends; returns (steps, terminated, truncated, info)."""
    for step in range(1, limit + 1):
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return step, terminated, truncated, info
    raise AssertionError(f"no episode end within {limit} steps")


def test_pong_observations_are_4_stacked_84x84_gray_uint8():
    env = make("pong")
    assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
    assert env.action_space.n == 6  # Pong's minimal action set
    obs, _ = env.reset(seed=1)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8 and env.observation_space.contains(obs)
    env.action_space.seed(0)
    for _ in range(40):
        obs, reward, *_ = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs) and isinstance(reward, float)
    assert obs.max() > obs.min()  # a real screen, not a blank buffer
    assert not np.array_equal(obs[0], obs[-1])  # the stack holds different moments


def test_resolution_and_rgb_keep_channels_first():
    env = make("pong", resolution="64x48", grayscale=False, frame_stack=2)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == obs.shape == (6, 48, 64)  # 2 frames x RGB, HxW
    assert obs.dtype == np.uint8


@pytest.mark.parametrize("frameskip", [4, 2])
def test_one_step_is_frameskip_frames(frameskip):
    """env.frameskip is done inside the preprocessing, so counting agent steps x frameskip
    (what the sampler does) counts emulator frames."""
    env = make("pong", frameskip=frameskip)
    env.reset(seed=0)
    ale = env.unwrapped.ale
    start = ale.getEpisodeFrameNumber()
    for _ in range(25):
        env.step(NOOP)
    assert ale.getEpisodeFrameNumber() - start == 25 * frameskip


def test_fire_reset_launches_the_ball():
    # In Breakout the ball stays put until FIRE: doing nothing never costs a life...
    env = make("breakout", fire_reset=False)
    env.reset(seed=0)
    for _ in range(300):
        _, _, terminated, _, _ = env.step(NOOP)
        assert not terminated
    assert env.unwrapped.ale.lives() == 5
    # ...while with FIRE pressed at reset the ball flies and the idle paddle misses it.
    env = make("breakout", fire_reset=True)
    env.reset(seed=0)
    steps, terminated, _, _ = play_until_done(env, limit=300)
    assert terminated and env.unwrapped.ale.lives() == 4


def test_lost_life_ends_the_episode_but_not_the_game():
    env = make("breakout")
    ale = env.unwrapped.ale
    env.reset(seed=0)
    _, terminated, _, info = play_until_done(env)
    assert terminated and info.get(GAME_CONTINUES) is True and ale.lives() == 4
    frames = ale.getEpisodeFrameNumber()
    env.reset()  # the same game goes on: no new lives, the frame counter keeps counting
    assert ale.lives() == 4 and ale.getEpisodeFrameNumber() > frames
    for lives_left in (3, 2, 1):
        play_until_done(env)
        assert ale.lives() == lives_left
        env.reset()
    _, terminated, _, info = play_until_done(env)  # the last life: the game is over
    assert terminated and GAME_CONTINUES not in info
    env.reset()
    assert ale.lives() == 5 and ale.getEpisodeFrameNumber() < 200


def test_without_episodic_life_only_game_over_ends_an_episode():
    env = make("breakout", episodic_life=False)
    env.reset(seed=0)
    fire = env.unwrapped.get_action_meanings().index("FIRE")  # relaunches the ball after each lost life
    _, terminated, _, info = play_until_done(env, action=fire)
    assert terminated and env.unwrapped.ale.lives() == 0 and GAME_CONTINUES not in info


def test_max_episode_frames_truncates():
    env = make("pong", max_episode_frames=400)
    env.reset(seed=0)
    steps, terminated, truncated, _ = play_until_done(env)
    assert truncated and not terminated and steps <= 400 // 4


def test_seeded_resets_repeat():
    def first_obs(seed):
        return make("pong", seed=None).reset(seed=seed)[0]

    assert np.array_equal(first_obs(3), first_obs(3))


def test_bad_game_name_lists_close_matches():
    with pytest.raises(ConfigError) as err:
        check_game("breakot")
    assert err.value.key == "env.id" and "'breakout'" in str(err.value)
    for gym_style in ("SpaceInvaders", "ALE/SpaceInvaders-v5", "SpaceInvadersNoFrameskip-v4"):
        with pytest.raises(ConfigError, match="close matches: \\['space_invaders'"):
            check_game(gym_style)


@pytest.mark.parametrize("key, value", [
    ("env.id", "pongg"), ("env.resolution", "84"), ("env.resolution", "0x84"), ("env.noop_max", -1),
    ("env.repeat_action_probability", 1.5), ("env.frame_stack", 0), ("env.max_episode_frames", 0),
])
def test_bad_settings_fail_validation_with_their_key(pong_cfg, key, value):
    OmegaConf.update(pong_cfg, key, value)
    with pytest.raises(ConfigError) as err:
        check_config(pong_cfg)
    assert err.value.key == key


@pytest.fixture(scope="module")
def _pong_composed():
    return compose_cfg("env=atari/pong")


@pytest.fixture
def pong_cfg(_pong_composed):
    return _pong_composed.copy()


def test_family_defaults_come_from_its_config_files():
    cfg = compose_cfg("env=atari/breakout")
    assert cfg.env.family == "atari" and cfg.env.id == "breakout" and cfg.env.frameskip == 4
    assert cfg.env.obs_scale == 255.0 and cfg.env.reward_clip == 1.0  # learner sees rewards clipped to [-1, 1]
    assert cfg.model.encoder._target_ == "sf_hydra.models.encoders.MultiKeyEncoder"
    assert cfg.model.encoder_conv_architecture == "convnet_atari" and not cfg.model.use_rnn
    check_config(cfg)


@pytest.mark.long  # kept out of CI's 30 minutes (see pyproject.toml); run with -m long
def test_every_game_of_the_table_composes():
    """env=atari/<game> is served from the game table (no file per game): the family's defaults,
    the game's name and ROM id, and the table's extra keys; pong's real file wins."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from sf_hydra.config import register_configs
    from sf_hydra.envs.atari.games import game_env_keys
    from tests.conftest import CONF_DIR

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):  # one Hydra for 104 composes
        for game in game_ids():
            env = compose("train", overrides=[f"env=atari/{game}"]).env
            assert (env.family, env.name, env.id, env.frameskip) == ("atari", f"atari_{game}", game, 4), game
            assert env.noop_max == game_env_keys(game).get("noop_max", 30), game
            assert env.resolution == ("42x42" if game == "pong" else "84x84"), game
    assert len(game_ids()) >= 100 and "pong" in game_ids()
    assert sorted(p.stem for p in (CONF_DIR / "env" / "atari").glob("*.yaml")) == ["pong"]  # tuned games only


def test_served_games_pass_the_env_name_check():
    from sf_hydra.app.env_choices import check_env_overrides
    from tests.conftest import CONF_DIR

    check_env_overrides(["env=atari/pong,atari/breakout,atari/space_invaders"], CONF_DIR)
    with pytest.raises(ConfigError, match="close matches: \\['atari/space_invaders'"):
        check_env_overrides(["env=atari/SpaceInvaders"], CONF_DIR)


# These few run in the default suite and in CI (a game without NOOP, one with lives and FIRE,
# two plain ones), the rest with -m long: building and stepping 104 games takes ~6 minutes on
# a loaded 2-core machine, a fifth of CI's budget. The quick tier (`-m "not slow"`) builds Pong alone.
REPRESENTATIVE = {"pong", "breakout", "backgammon", "space_invaders"}
QUICK = {"pong"}


@pytest.mark.parametrize("game", [g if g in QUICK else pytest.param(g, marks=pytest.mark.slow) if g in REPRESENTATIVE
                                  else pytest.param(g, marks=pytest.mark.long) for g in game_ids()])
@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
def test_every_game_config_builds_and_steps(game):
    cfg = compose_cfg(f"env=atari/{game}")
    check_config(cfg)
    env = make_atari_env(cfg.env, seed=0)
    # gymnasium's own checker: spaces, seeded resets that repeat, step and reset return types.
    check_env(env, skip_render_check=True)
    env.close()
