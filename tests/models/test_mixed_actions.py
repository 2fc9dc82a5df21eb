"""Mixed Tuple action spaces (Discrete and Box parts): one flat float action vector in the
trajectories, a product of a categorical and a diagonal Gaussian as the distribution."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Normal, kl_divergence

from sf_hydra.app.train import train
from sf_hydra.config import ConfigError
from sf_hydra.core.spaces import action_spec, is_mixed_tuple, num_discrete_actions, to_env_action
from sf_hydra.models import build_model, model_recipe
from sf_hydra.models.action_heads import TupleHead
from tests.helpers.mixed_action_envs import MixedActionEnv

SPACE = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                          gym.spaces.Discrete(2)))


def test_layout_of_the_action_vector():
    assert is_mixed_tuple(SPACE) and not is_mixed_tuple(gym.spaces.Tuple((gym.spaces.Discrete(2),) * 2))
    assert action_spec(SPACE) == ((4,), torch.float32)
    assert num_discrete_actions(SPACE) == 5
    action = to_env_action(SPACE, np.array([2.0, 0.5, -3.0, 1.0], np.float32))
    assert action[0] == 2 and action[2] == 1 and isinstance(action[0], int)
    assert np.array_equal(action[1], np.array([0.5, -1.0], np.float32))  # the Box part clipped to its bounds
    assert SPACE.contains(action)


def test_tuple_of_discretes_stays_integer_actions():
    space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3)))
    assert action_spec(space) == ((2,), torch.int64)
    assert to_env_action(space, np.array([1, 2])) == (1, 2)


@pytest.fixture
def head(tmp_cfg):
    torch.manual_seed(0)
    cfg = tmp_cfg("model.adaptive_stddev=true")
    return TupleHead(8, SPACE, cfg.model)


def _parts(head, x):
    """The parts' torch distributions, from the sub-heads' own layers (by definition)."""
    logits1, gauss, logits2 = (p.linear(x) if hasattr(p, "linear") else None for p in head.parts)
    g = head.parts[1]
    std = g.log_std(x).clamp(-4.0, 2.0).exp()
    return Categorical(logits=logits1), Normal(g.mean(x), std), Categorical(logits=logits2)


def test_log_prob_and_entropy_are_sums_of_the_parts(head):
    x = torch.randn(5, 8)
    dist = head.distribution(x)
    actions = dist.sample()
    assert actions.shape == (5, 4)
    c1, n, c2 = _parts(head, x)
    expected = (c1.log_prob(actions[:, 0].long()) + n.log_prob(actions[:, 1:3]).sum(-1)
                + c2.log_prob(actions[:, 3].long()))
    assert torch.allclose(dist.log_prob(actions), expected, atol=1e-5)
    assert torch.allclose(dist.entropy(), c1.entropy() + n.entropy().sum(-1) + c2.entropy(), atol=1e-5)


def test_samples_are_valid_actions(head):
    actions = head.distribution(torch.randn(200, 8)).sample()
    assert set(actions[:, 0].tolist()) == {0.0, 1.0, 2.0} and set(actions[:, 3].tolist()) == {0.0, 1.0}
    mode = head.distribution(torch.randn(3, 8)).mode()
    assert torch.equal(mode[:, 0], mode[:, 0].round())


def test_params_and_kl_to_match_torch(head):
    x_old, x_new = torch.randn(6, 8), torch.randn(6, 8)
    old, new = head.distribution(x_old), head.distribution(x_new)
    assert old.params().shape == (6, head.params_size) and head.params_size == 3 + 4 + 2
    expected = sum(kl_divergence(p, q).sum(-1) if isinstance(p, Normal) else kl_divergence(p, q)
                   for q, p in zip(_parts(head, x_old), _parts(head, x_new)))  # KL(new || old)
    assert torch.allclose(new.kl_to(old.params()), expected, atol=1e-5)
    assert torch.allclose(old.kl_to(old.params()), torch.zeros(6), atol=1e-6)


def test_gradients_reach_both_parts(head):
    x = torch.randn(4, 8)
    dist = head.distribution(x)
    (dist.log_prob(dist.sample()) + dist.entropy()).sum().backward()
    for name, p in head.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_model_act_and_evaluate_agree(tmp_cfg):
    model = build_model(model_recipe(tmp_cfg("model.use_rnn=true", "model.rnn_size=8")),
                        MixedActionEnv.observation_space, MixedActionEnv.action_space)
    obs = torch.rand(4, 4)
    out = model.act({"obs": obs}, torch.zeros(4, 8))
    assert out.actions.shape == (4, 2) and out.actions.dtype == torch.float32
    log_probs, _, values = model.evaluate({"obs": obs[:, None]}, out.actions[:, None], torch.zeros(4, 8),
                                          torch.zeros(4, 1))
    assert torch.allclose(log_probs[:, 0], out.log_probs, atol=1e-5)
    assert torch.allclose(values[:, 0], out.values, atol=1e-5)


def test_symmetric_kl_is_refused_for_mixed_actions(tmp_cfg):
    cfg = tmp_cfg("env=gym/any", "env.id=tests.helpers.mixed_action_envs:MixedAction-v0",
                  "algo.exploration_loss=symmetric_kl")
    with pytest.raises(ConfigError, match=r"^algo.exploration_loss='symmetric_kl'.*mixed action space"):
        train(cfg)


@pytest.mark.slow
def test_mixed_actions_train_through_the_sampler(tmp_cfg):
    """Both parts reach the env intact (it asserts every action is in its space; a crash stops
    the run: max_env_restarts=0) and the KL penalty reads the recorded parameters of both."""
    cfg = tmp_cfg("env=gym/any", "env.id=tests.helpers.mixed_action_envs:MixedAction-v0",
                  "train_for_env_steps=4000", "model.use_rnn=false", "hardware.max_env_restarts=0",
                  "algo.kl_loss_coeff=0.1", "hardware.serial_mode=true")
    summary = train(cfg)
    assert summary["env_steps"] >= 4000 and summary["episodes"] > 0 and summary["policy_version"] > 0
    assert 0.0 < summary["avg_return"] <= 2.0 * MixedActionEnv.LENGTH


@pytest.mark.slow
def test_both_parts_are_learned(tmp_cfg):
    """Each part beats a random policy by its own score (class_hits: random 1/3; target_error:
    random ~0.75), so neither part's gradient can be missing."""
    cfg = tmp_cfg("env=gym/any", "env.id=tests.helpers.mixed_action_envs:MixedAction-v0",
                  "train_for_env_steps=20000", "model.use_rnn=false", "algo.learning_rate=1e-3")
    stats = train(cfg)["policies"][0]["episode_stats"]
    assert stats["class_hits"] > 0.55 and stats["target_error"] < 0.6, stats
