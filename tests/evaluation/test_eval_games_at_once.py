"""An evaluation plays its games several at a time (EvalSettings.max_envs envs in lockstep, one forward pass per
step for all of them): the same games, seed by seed, as one game after another, with far fewer forward passes.
Real CartPole envs, a real (untrained, GRU) model in a policy store, the evaluation process's own Evaluator."""

import pytest
import torch

from sf_hydra.envs import make_env
from sf_hydra.evaluation.process import EvalRequest, EvalSettings, Evaluator
from sf_hydra.models import build_model, model_recipe
from sf_hydra.models.recipe import plain
from sf_hydra.sampler.policy_store import PolicyStore
from tests.conftest import compose_cfg


def _evaluate(tmp_path, cfg, store, max_envs: int, episodes: int = 10):
    settings = EvalSettings(run_dir=str(tmp_path / f"at_once_{max_envs}"), seed=7, num_policies=1, episodes=episodes,
                            deterministic=True, max_episode_steps=None, video_every=0, video_format="gif",
                            video_frames=None, env=plain(cfg.env), model=model_recipe(cfg), max_envs=max_envs)
    evaluator = Evaluator(settings, [store])
    calls = []
    act = evaluator.models[0].act
    evaluator.models[0].act = lambda obs, rnn, **kw: calls.append(len(obs["obs"])) or act(obs, rnn, **kw)
    try:
        record = evaluator.evaluate(EvalRequest(0, 0, [0], [1]))
    finally:
        evaluator.close()
    assert len(evaluator.envs) == min(max_envs, episodes)
    return [(e["return"], e["length"]) for e in record["policies"][0]["episodes"]], calls


@pytest.mark.parametrize("use_rnn", [True, False])
def test_games_played_at_once_are_the_games_played_one_by_one(tmp_path, use_rnn):
    cfg = compose_cfg("env=gym/cartpole", f"model.use_rnn={str(use_rnn).lower()}")
    probe = make_env(cfg.env)
    torch.manual_seed(3)
    model = build_model(model_recipe(cfg), probe.observation_space, probe.action_space).eval()
    probe.close()
    with torch.no_grad():  # larger weights: actions that hang on the RNN state (a mixed-up state changes the games)
        for p in model.parameters():
            p.mul_(4.0)
    store = PolicyStore(model)
    store.publish(model, 1)

    one_by_one, calls_1 = _evaluate(tmp_path, cfg, store, max_envs=1)
    lengths = [n for _, n in one_by_one]
    assert len(set(lengths)) > 2  # games of several lengths: envs are handed on to the next seed at different steps
    assert calls_1 == [1] * sum(lengths)  # one forward pass per game step
    for max_envs in (4, 10):
        at_once, calls = _evaluate(tmp_path, cfg, store, max_envs)
        assert at_once == one_by_one  # game i is seed i's game, each with its own RNN state
        assert len(calls) < sum(lengths) / 3 and max(calls) == max_envs
