"""The mujoco env family and continuous actions against real MuJoCo tasks (no mocks):
spaces, action clipping on the way to env.step, the tanh-squashed Gaussian's log-prob, and
config errors for bad ids and kwargs."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco", reason="the mujoco env family needs the mujoco package (pip install -e '.[mujoco]')")

from omegaconf import OmegaConf  # noqa: E402
from torch.distributions import AffineTransform, Independent, Normal, TanhTransform, TransformedDistribution  # noqa: E402

from sf_hydra.app.train import check_config  # noqa: E402
from sf_hydra.config.schema import ModelConfig  # noqa: E402
from sf_hydra.core.errors import ConfigError  # noqa: E402
from sf_hydra.core.spaces import to_env_action  # noqa: E402
from sf_hydra.envs import make_env  # noqa: E402
from sf_hydra.envs.mujoco.family import known_ids, make_mujoco_env, validate_env  # noqa: E402
from sf_hydra.envs.mujoco.schema import MujocoEnvConfig  # noqa: E402
from sf_hydra.models.action_heads import TanhDiagGaussian, make_action_head  # noqa: E402
from tests.conftest import make_cfg  # noqa: E402

# id -> (observation size, action size, action bound)
TASKS = {
    "HalfCheetah-v5": (17, 6, 1.0),
    "Hopper-v5": (11, 3, 1.0),
    "Walker2d-v5": (17, 6, 1.0),
    "Ant-v5": (105, 8, 1.0),
    "Humanoid-v5": (348, 17, 0.4),
}


def mujoco_cfg(env_id="HalfCheetah-v5", **overrides):
    cfg = OmegaConf.structured(MujocoEnvConfig(name="test", id=env_id))
    cfg.factory = {"_target_": "sf_hydra.envs.mujoco.family.MujocoFamily"}  # as conf/env_family/mujoco.yaml
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


@pytest.mark.parametrize("env_id", sorted(TASKS))
def test_spaces_and_float32_observations(env_id):
    obs_size, act_size, bound = TASKS[env_id]
    env = make_env(mujoco_cfg(env_id), seed=0)
    try:
        assert env.observation_space.shape == (obs_size,) and env.observation_space.dtype == np.float32
        space = env.action_space
        assert isinstance(space, gym.spaces.Box) and space.shape == (act_size,)
        np.testing.assert_allclose(space.low, -bound) and np.testing.assert_allclose(space.high, bound)
        obs, _ = env.reset(seed=1)
        assert obs.dtype == np.float32 and env.observation_space.contains(obs)
        space.seed(0)
        for _ in range(20):
            obs, reward, terminated, truncated, _ = env.step(space.sample())
            assert obs.dtype == np.float32 and np.isfinite(obs).all() and math.isfinite(reward)
            if terminated or truncated:
                env.reset()
    finally:
        env.close()


def test_known_ids_are_the_mujoco_bindings_tasks():
    ids = known_ids()
    assert set(TASKS) <= set(ids)
    assert "HalfCheetah-v4" in ids and "HalfCheetah-v3" not in ids  # v3 needs the retired mujoco-py
    assert "CartPole-v1" not in ids


def test_actions_are_clipped_to_the_box_before_env_step():
    """HalfCheetah's control cost is 0.1 * |a|^2 of the action it receives: a sample outside
    the box must cost what its clipped value costs, not more."""
    rng = np.random.default_rng(0)
    raw = (rng.normal(size=6) * 3).astype(np.float32)
    assert np.abs(raw).max() > 1.0
    rewards = {}
    for name, action in (("sent", to_env_action(gym.spaces.Box(-1, 1, (6,), np.float32), raw)),
                         ("clipped", np.clip(raw, -1, 1)), ("raw", raw)):
        env = make_mujoco_env(mujoco_cfg(), seed=3)
        env.reset(seed=3)
        _, rewards[name], _, _, info = env.step(action)
        rewards[name + "_ctrl"] = info["reward_ctrl"]
        env.close()
    assert rewards["sent"] == rewards["clipped"]
    assert rewards["sent_ctrl"] == pytest.approx(-0.1 * float(np.sum(np.clip(raw, -1, 1) ** 2)), rel=1e-5)
    assert rewards["raw_ctrl"] < rewards["sent_ctrl"]  # unclipped, the env would have charged more


def test_bad_id_and_kwargs_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"env.id='HalfCheeta-v5'.*close matches: \['HalfCheetah-v"):
        validate_env(mujoco_cfg("HalfCheeta-v5"))
    with pytest.raises(ConfigError, match="CartPole-v1"):
        validate_env(mujoco_cfg("CartPole-v1"))
    with pytest.raises(ConfigError, match=r"env.kwargs.ctrl_cost=.*ctrl_cost_weight"):
        validate_env(mujoco_cfg(kwargs={"ctrl_cost": 0.2}))
    with pytest.raises(ConfigError, match=r"env.kwargs.max_episode_steps.*env.max_episode_steps"):
        validate_env(mujoco_cfg(kwargs={"max_episode_steps": 10}))
    # The whole config, as train() checks it before any process starts.
    with pytest.raises(ConfigError, match="env.id='Hopper-v9'"):
        check_config(make_cfg(tmp_path, "env=mujoco/hopper", "env.id=Hopper-v9"))
    validate_env(mujoco_cfg(kwargs={"ctrl_cost_weight": 0.2}))  # a real task argument passes


def test_task_kwargs_and_noise_reach_the_task():
    env = make_env(mujoco_cfg(kwargs={"ctrl_cost_weight": 0.0}, reset_noise_scale=0.0), seed=0)
    first, _ = env.reset(seed=0)
    second, _ = env.reset(seed=1)
    np.testing.assert_array_equal(first, second)  # no reset noise: every start is the same
    _, _, _, _, info = env.step(np.ones(6, np.float32))
    assert info["reward_ctrl"] == 0.0
    env.close()


def test_frameskip_repeats_actions_and_time_limit_counts_agent_steps():
    env = make_env(mujoco_cfg(frameskip=4, max_episode_steps=10), seed=0)
    env.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        _, _, terminated, truncated, _ = env.step(np.zeros(6, np.float32))
        assert not terminated
        steps += 1
    assert steps == 10
    env.close()


def squash_head(space, adaptive=False):
    cfg = OmegaConf.structured(ModelConfig(adaptive_stddev=adaptive, initial_stddev=0.7, tanh_squash_actions=True))
    return make_action_head(8, space, cfg)


@pytest.mark.parametrize("adaptive", [False, True])
def test_tanh_squashed_log_prob_matches_change_of_variables(adaptive):
    torch.manual_seed(0)
    space = gym.spaces.Box(np.array([-0.4, -2.0, 0.0], np.float32), np.array([0.4, 2.0, 1.0], np.float32))
    head = squash_head(space, adaptive)
    x = torch.randn(256, 8) * 3
    with torch.no_grad():
        dist = head.distribution(x)
        mu = head.mean(x)
    actions = dist.sample()
    assert all(space.contains(a) for a in actions.numpy())
    assert all(space.contains(a) for a in dist.mode().numpy())
    std = (head.log_std(x) if adaptive else head.log_std_param.expand_as(mu)).clamp(-4.0, 2.0).exp().detach()
    low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
    reference = Independent(TransformedDistribution(
        Normal(mu.double(), std.double()),
        [TanhTransform(), AffineTransform((high + low).double() / 2, (high - low).double() / 2)],
    ), 1)
    inside = ((actions - low).abs() > 1e-3).all(-1) & ((high - actions).abs() > 1e-3).all(-1)
    assert inside.sum() > 100
    torch.testing.assert_close(dist.log_prob(actions)[inside].double(), reference.log_prob(actions.double())[inside],
                               rtol=1e-4, atol=2e-3)


def test_tanh_squashed_density_integrates_to_one():
    """1-D check without torch's transforms: the density sums to 1 over the box."""
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    dist = TanhDiagGaussian(torch.tensor([[0.3]]), torch.tensor([[0.8]]), torch.tensor([0.0]), torch.tensor([2.0]))
    grid = torch.linspace(float(space.low[0]), float(space.high[0]), 200_001)[1:-1].unsqueeze(-1)
    density = dist.log_prob(grid).exp()
    assert torch.trapezoid(density, grid.squeeze(-1)).item() == pytest.approx(1.0, abs=1e-3)


def test_tanh_squashed_saturated_actions_keep_finite_log_probs_and_entropy():
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    dist = TanhDiagGaussian(torch.tensor([[30.0, -30.0]]), torch.tensor([[0.1, 0.1]]), torch.zeros(2), torch.ones(2))
    actions = dist.sample()
    np.testing.assert_array_equal(actions.numpy(), [[1.0, -1.0]])  # float32 tanh saturates
    assert torch.isfinite(dist.log_prob(actions)).all() and torch.isfinite(dist.entropy()).all()
    torch.manual_seed(0)
    # The one-sample entropy estimate averages to -E[log p(a)].
    wide = TanhDiagGaussian(torch.zeros(20_000, 2), torch.full((20_000, 2), 1.5), torch.zeros(2), torch.ones(2) * 0.4)
    assert wide.entropy().mean().item() == pytest.approx(-wide.log_prob(wide.sample()).mean().item(), abs=0.03)
    assert all(space.contains(a) for a in wide.sample()[:100].numpy() / 0.4)


def test_squashing_an_unbounded_box_is_a_config_error():
    with pytest.raises(ConfigError, match="model.tanh_squash_actions=True.*finite bounds"):
        squash_head(gym.spaces.Box(-np.inf, np.inf, (2,), np.float32))


def test_squashing_and_mean_squashing_together_are_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model.continuous_tanh_scale"):
        check_config(make_cfg(tmp_path, "env=mujoco/halfcheetah", "model.tanh_squash_actions=true",
                              "model.continuous_tanh_scale=1.0"))
