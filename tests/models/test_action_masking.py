"""Action masks: an env sends observation key `action_mask` (1 = allowed); forbidden actions
get probability exactly 0 when acting and in the learner's log-probs and entropy."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.config import ConfigError
from sf_hydra.models import build_model, model_recipe
from sf_hydra.models.action_heads import CategoricalHead, MultiCategorical, masked_logits
from sf_hydra.models.actor_critic import check_model_for_env
from tests.helpers.masked_envs import BoxMaskedEnv, MaskedEnv, WrongSizeMaskEnv

MASK = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 1]], dtype=torch.int8)


def test_masked_logits_give_probability_exactly_zero():
    logits = torch.randn(3, 4) * 5
    probs = torch.softmax(masked_logits(logits, MASK), dim=-1)
    assert torch.all(probs[MASK == 0] == 0.0)
    # The allowed actions keep their relative odds: softmax over the allowed logits only.
    for row in range(3):
        allowed = MASK[row].bool()
        assert torch.allclose(probs[row, allowed], torch.softmax(logits[row, allowed], dim=-1))


def test_log_prob_and_entropy_are_those_of_the_allowed_actions():
    logits = torch.randn(3, 4)
    dist = MultiCategorical([masked_logits(logits, MASK)], single=True)
    for row in range(3):
        allowed = torch.nonzero(MASK[row]).flatten()
        reference = torch.distributions.Categorical(logits=logits[row, allowed])
        assert torch.allclose(dist.entropy()[row], reference.entropy(), atol=1e-6)
        for i, a in enumerate(allowed):
            lp = dist.log_prob(torch.full((3,), int(a)))[row]
            assert torch.allclose(lp, reference.log_prob(torch.tensor(i)), atol=1e-6)
    assert torch.isfinite(dist.entropy()).all()


def test_all_forbidden_row_stays_finite():
    """An unused buffer row (zeros) masks everything: uniform, finite entropy and gradients."""
    head = CategoricalHead(8, [4], single=True)
    x = torch.randn(1, 8, requires_grad=True)
    dist = head.distribution(x, torch.zeros(1, 4))
    assert torch.equal(dist.act()[1], torch.tensor([-np.log(4.0)], dtype=torch.float32))
    assert torch.allclose(dist.entropy(), torch.tensor([np.log(4.0)], dtype=torch.float32))
    assert torch.allclose(dist.log_prob(torch.tensor([2])), torch.tensor([-np.log(4.0)], dtype=torch.float32))
    (dist.entropy() + dist.log_prob(torch.tensor([2]))).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_acting_never_picks_a_forbidden_action():
    torch.manual_seed(0)
    head = CategoricalHead(8, [4], single=True)
    x = torch.randn(3, 8).repeat(2000, 1)
    actions, log_probs = head.distribution(x, MASK.repeat(2000, 1)).act()
    assert torch.all(MASK.repeat(2000, 1).gather(1, actions[:, None]) == 1)
    assert torch.isfinite(log_probs).all()
    assert set(actions[2::3].tolist()) == {0, 1, 2, 3}  # the unmasked row still explores everything


def test_entropy_gradient_is_finite_and_skips_forbidden_logits():
    head = CategoricalHead(8, [4], single=True)
    x = torch.randn(3, 8, requires_grad=True)
    logits = head.linear(x)
    logits.retain_grad()
    dist = MultiCategorical([masked_logits(logits, MASK)], single=True)
    dist.entropy().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert torch.all(logits.grad[MASK == 0] == 0.0)


def test_model_masks_in_act_and_evaluate_and_does_not_encode_the_mask(tmp_cfg):
    cfg = tmp_cfg("model.use_rnn=true", "model.rnn_size=8", "algo.normalize_input=true")
    model = build_model(model_recipe(cfg), MaskedEnv.observation_space, MaskedEnv.action_space)
    assert set(model.encoder.encoders) == {"obs"} and set(model.preprocess.norms) == {"obs"}
    obs = {"obs": torch.rand(3, 4), "action_mask": MASK}
    rnn = torch.zeros(3, model.rnn_state_size)
    for _ in range(50):
        out = model.act(obs, rnn)
        assert torch.all(MASK.gather(1, out.actions[:, None]) == 1)
    seq = {k: v[:, None] for k, v in obs.items()}  # [B, T=1]
    log_probs, entropy, values = model.evaluate(seq, out.actions[:, None], rnn, torch.zeros(3, 1))
    assert torch.allclose(log_probs[:, 0], out.log_probs, atol=1e-5)
    assert torch.allclose(values[:, 0], out.values, atol=1e-5)
    assert torch.isfinite(entropy).all()
    other = model.act({"obs": obs["obs"], "action_mask": torch.ones(3, 4, dtype=torch.int8)}, rnn)
    assert torch.equal(other.values, out.values)  # the mask changes the policy only, not the features


@pytest.mark.parametrize("env_cls,words", [(BoxMaskedEnv, "has none to mask"),
                                          (WrongSizeMaskEnv, r"shape \(5,\).*Discrete\(5\).*shape \(4,\)")])
def test_bad_masks_are_refused_naming_env_and_action_space(tmp_cfg, env_cls, words):
    cfg = tmp_cfg("env=gym/any", "env.id=some-env")
    with pytest.raises(ConfigError, match=r"^env.id='some-env' is not allowed.*" + words):
        check_model_for_env(cfg, env_cls.observation_space, env_cls.action_space)
    with pytest.raises(ConfigError, match=words):
        build_model(model_recipe(cfg), env_cls.observation_space, env_cls.action_space)


def test_train_refuses_a_bad_mask_before_workers_start(tmp_cfg):
    cfg = tmp_cfg("env=gym/any", "env.id=tests.helpers.masked_envs:BoxMasked-v0")
    with pytest.raises(ConfigError, match="env.id='tests.helpers.masked_envs:BoxMasked-v0'.*Box"):
        train(cfg)


def test_symmetric_kl_is_refused_with_masks(tmp_cfg):
    cfg = tmp_cfg("env=gym/any", "env.id=tests.helpers.masked_envs:Masked-v0", "algo.exploration_loss=symmetric_kl")
    with pytest.raises(ConfigError, match="^algo.exploration_loss='symmetric_kl'.*action_mask"):
        train(cfg)


@pytest.mark.slow
def test_training_through_the_sampler_never_takes_a_masked_action(tmp_cfg):
    """MaskedEnv ends an episode at the first forbidden action and reports it; every episode
    is in the statistics window (stats_avg), so the average is 0 only if none ever was."""
    cfg = tmp_cfg("env=gym/any", "env.id=tests.helpers.masked_envs:Masked-v0", "train_for_env_steps=4000",
                  "logger.stats_avg=1000000", "model.use_rnn=false", "hardware.max_env_restarts=0",
                  "hardware.serial_mode=true")
    summary = train(cfg)
    stats = summary["policies"][0]
    assert stats["episodes"] >= 100
    assert stats["episode_stats"] == {"masked_actions": 0.0}
    assert summary["policy_version"] > 0


def test_masked_env_really_punishes_forbidden_actions():
    """The env the training test relies on: a forbidden action is counted and ends the episode."""
    env = MaskedEnv()
    obs, _ = env.reset(seed=1)
    forbidden = int(np.flatnonzero(obs["action_mask"] == 0)[0]) if (obs["action_mask"] == 0).any() else None
    while forbidden is None:
        obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        forbidden = int(np.flatnonzero(obs["action_mask"] == 0)[0]) if (obs["action_mask"] == 0).any() else None
    _, reward, terminated, _, info = env.step(forbidden)
    assert terminated and reward < 0 and info["episode_extra_stats"]["masked_actions"] == 1.0
    assert isinstance(MaskedEnv.action_space, gym.spaces.Discrete)


def test_multidiscrete_mask_covers_every_categorical_in_order():
    """MultiDiscrete([2, 3]): the mask has 2 + 3 entries, the first categorical's then the second's."""
    head = CategoricalHead(8, [2, 3], single=False)
    mask = torch.tensor([[0, 1, 1, 0, 0]]).repeat(500, 1)
    dist = head.distribution(torch.randn(500, 8), mask)
    actions, _ = dist.act()
    assert torch.all(actions[:, 0] == 1) and torch.all(actions[:, 1] == 0)
    assert torch.allclose(dist.log_prob(actions), torch.zeros(500), atol=1e-6)  # each part has one choice left


def test_mixed_tuple_mask_reaches_only_the_categorical_part(tmp_cfg):
    from sf_hydra.models.action_heads import TupleHead

    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))
    head = TupleHead(8, space, tmp_cfg().model)
    dist = head.distribution(torch.randn(400, 8), torch.tensor([[0, 0, 1]]).repeat(400, 1))
    actions = dist.sample()
    assert torch.all(actions[:, 0] == 2.0) and actions[:, 1:].std() > 0
    assert torch.isfinite(dist.entropy()).all() and torch.isfinite(dist.log_prob(actions)).all()
