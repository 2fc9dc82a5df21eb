"""Episode statistics are whole games: with Atari's episodic life a lost life ends the
learner's episode, but the sampler reports one episode per game (all five Breakout lives),
with the game's return and length. Checked on the real ALE through the real sampler (both
worker kinds), against the buffers it wrote and against a plain loop that replays the
recorded actions and ends games where the ALE says the game is over."""

import pytest
import torch

pytest.importorskip("ale_py", reason="the atari env family needs ale-py (pip install 'sf_hydra[atari]')")
pytest.importorskip("cv2", reason="gymnasium's AtariPreprocessing needs OpenCV (pip install opencv-python-headless)")

from sf_hydra.app.enjoy import Seat, SingleAgent, obs_batch, play_episode  # noqa: E402
from sf_hydra.core.seeding import env_seed  # noqa: E402
from sf_hydra.core.spaces import obs_specs, to_env_action  # noqa: E402
from sf_hydra.envs import make_env  # noqa: E402
from sf_hydra.envs.episode_info import GAME_CONTINUES  # noqa: E402
from sf_hydra.evaluation.policy import Policy  # noqa: E402
from sf_hydra.models import build_model, model_recipe  # noqa: E402
from tests.conftest import make_cfg  # noqa: E402
from tests.sampler.collect import collect  # noqa: E402

LIVES = 5  # Breakout's


def breakout_cfg(tmp_path, *overrides):
    # Unclipped, unscaled rewards in the buffers (Breakout's bricks score 1, 4 or 7); async so
    # that the workers do not wait for a learner; small frames and net keep the acting cheap.
    return make_cfg(
        tmp_path, "env=atari/breakout", "env.resolution=42x42", "env.reward_clip=100", "env.reward_scale=1",
        "algo.async_rl=true", "hardware.num_workers=1", "algo.rollout=64", "algo.batch_size=64",
        "hardware.decorrelate_envs_on_one_worker=false",  # games are replayed from each env's seeded reset
        "model.encoder_conv_mlp_layers=[32]",
        *overrides,
    )


def row_streams(batch, rows: int):
    """Per env row: its actions, rewards and dones in step order. Each message holds one slot
    per row, in row order, and the messages come in order (one worker)."""
    return [{k: batch[k][r::rows].reshape(-1).numpy() for k in ("actions", "rewards", "dones")} for r in range(rows)]


def games_in_buffers(stream) -> list:
    """(return, length) of the games in one row's stream: every LIVES-th done ends a game."""
    games, ret, length, lives_lost = [], 0.0, 0, 0
    for reward, done in zip(stream["rewards"], stream["dones"]):
        ret, length = ret + float(reward), length + 1
        lives_lost += int(done)
        if lives_lost == LIVES:
            games.append((ret, length))
            ret, length, lives_lost = 0.0, 0, 0
    return games


def replayed_games(cfg, seed, actions) -> list:
    """(return, length) of the games a plain gymnasium loop plays with these actions, built
    and seeded as the worker does; a game ends when the ALE says it is over."""
    env = make_env(cfg.env, seed=seed)
    env.reset(seed=seed)
    games, ret, length = [], 0.0, 0
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(to_env_action(env.action_space, action))
        ret, length = ret + float(reward), length + 1
        if terminated or truncated:
            if env.unwrapped.ale.game_over():
                games.append((ret, length))
                ret, length = 0.0, 0
            env.reset()
    env.close()
    return games


def check_whole_games(cfg, rows: int, got) -> None:
    streams = row_streams(got.batch, rows)
    from_buffers = [g for s in streams for g in games_in_buffers(s)]
    lives_ended = sum(int(s["dones"].sum()) for s in streams)
    assert len(from_buffers) >= 2, f"too few games played ({lives_ended} lives lost)"
    # One reported episode per game, never one per life.
    assert len(got.episodes) == len(from_buffers) and lives_ended >= LIVES * len(got.episodes)
    # Scores are sums of whole points, exact in floating point: compared exactly.
    reported = sorted((e.ret, e.length) for e in got.episodes)
    assert reported == sorted(from_buffers)
    replayed = [g for r, s in enumerate(streams) for g in replayed_games(cfg, env_seed(cfg.seed, 0, r), s["actions"])]
    assert reported == sorted(replayed)


@pytest.mark.slow
def test_rollout_workers_report_whole_games(tmp_path):
    cfg = breakout_cfg(tmp_path, "hardware.num_envs_per_worker=2")
    check_whole_games(cfg, 2, collect(cfg, min_slots=24))


@pytest.mark.slow
def test_batched_sampling_reports_whole_games(tmp_path):
    # One vector env of one sub-env: the agent-rows worker, one row whose slots come in order.
    cfg = breakout_cfg(tmp_path, "hardware.batched_sampling=true", "hardware.num_envs_per_worker=1",
                       "hardware.worker_num_splits=1")
    check_whole_games(cfg, 1, collect(cfg, min_slots=12))


def test_enjoy_plays_whole_games(tmp_path):
    cfg = breakout_cfg(tmp_path)
    env = make_env(cfg.env, seed=0)
    model = build_model(model_recipe(cfg), env.observation_space, env.action_space).eval()
    torch.manual_seed(0)
    policy = Policy(model, env.observation_space, env.action_space)
    seats, _ = play_episode(SingleAgent(env), [Seat(policy, 0)], obs_specs(env.observation_space), False, seed=0,
                            max_steps=None)
    ret, steps = seats[0].total, seats[0].steps  # (enjoy resets the env at once: the plain loop checks the end)
    torch.manual_seed(0)  # the same game again in a plain loop that stops at the ALE's game over only
    obs, _ = env.reset(seed=0)
    total, length = 0.0, 0
    while not env.unwrapped.ale.game_over():
        action = model.act(obs_batch(obs, obs_specs(env.observation_space)), None).actions[0].numpy()
        obs, reward, terminated, truncated, _ = env.step(to_env_action(env.action_space, action))
        total, length = total + float(reward), length + 1
        if (terminated or truncated) and not env.unwrapped.ale.game_over():
            obs, _ = env.reset()
    assert (ret, steps) == (total, length)
    env.close()


def test_a_time_limit_ends_the_game_not_a_life():
    """env.max_episode_steps caps a whole game: the reset after the cut starts a new game."""
    from tests.envs.test_atari_env import make, play_until_done

    env = make("breakout", max_episode_steps=30)
    env.reset(seed=0)
    steps, terminated, truncated, info = play_until_done(env, action=0)  # NOOP: the paddle misses, a life is lost
    assert terminated and info.get(GAME_CONTINUES) and steps < 30
    env.reset()
    steps_left, terminated, truncated, info = play_until_done(env, action=0)
    assert truncated and not info.get(GAME_CONTINUES)
    assert env.unwrapped.ale.lives() < LIVES  # cut in the game's second life: the limit counts the whole game
    env.reset()
    assert env.unwrapped.ale.lives() == LIVES
