"""Every mujoco config through the whole stack: composed from conf/, validated, a few hundred
real MuJoCo steps through the real sampler and learner. Plus what continuous actions do in
the sampler: stored samples are the unclipped ones (with their log-probs), the env gets them
clipped, and tanh-squashed actions never leave the box."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco", reason="the mujoco env family needs the mujoco package (pip install -e '.[mujoco]')")

from sf_hydra.app.env_choices import env_configs  # noqa: E402
from sf_hydra.app.train import check_config, train  # noqa: E402
from sf_hydra.core.trajectory import obs_fields_of  # noqa: E402
from sf_hydra.plan import plan_run  # noqa: E402
from sf_hydra.sampler.env_info import describe_env  # noqa: E402
from sf_hydra.sampler.sampler import Sampler  # noqa: E402
from tests.conftest import CONF_DIR, make_cfg  # noqa: E402

MUJOCO_CONFIGS = [name for name in env_configs(CONF_DIR) if name.startswith("mujoco/")]
# Small and synchronous: one round of 2 workers x 4 envs x 32 steps is one iteration.
SMALL = ("hardware.num_envs_per_worker=4", "algo.rollout=32", "algo.batch_size=128", "algo.num_batches_per_epoch=2")


def test_every_task_has_a_config():
    assert sorted(MUJOCO_CONFIGS) == ["mujoco/ant", "mujoco/halfcheetah", "mujoco/hopper", "mujoco/humanoid",
                                      "mujoco/walker2d"]


def test_family_defaults_come_from_config_files(tmp_path):
    cfg = make_cfg(tmp_path, "env=mujoco/halfcheetah")
    assert cfg.env.family == "mujoco" and cfg.env.id == "HalfCheetah-v5"
    assert cfg.model.encoder_mlp_layers == [64, 64] and not cfg.model.use_rnn and not cfg.model.adaptive_stddev
    assert not cfg.algo.async_rl and cfg.algo.value_bootstrap and cfg.algo.lr_schedule == "linear_decay"
    # the command line wins
    assert make_cfg(tmp_path, "env=mujoco/halfcheetah", "model=mlp").model.nonlinearity == "tanh"
    # The shipped defaults (not the fast test settings) satisfy every sampling rule too.
    from tests.conftest import compose_cfg

    check_config(compose_cfg("env=mujoco/halfcheetah"))


@pytest.mark.slow
@pytest.mark.parametrize("name", MUJOCO_CONFIGS)
def test_config_trains_a_few_hundred_steps(tmp_path, name):
    # Worker processes for one task; the same sampler code in-process (serial) for the rest,
    # which saves each run the workers' start-up.
    serial = name != "mujoco/halfcheetah"
    cfg = make_cfg(tmp_path, f"env={name}", *SMALL, f"hardware.serial_mode={serial}", "train_for_env_steps=600")
    summary = train(cfg)
    assert summary["env_steps"] >= 600
    assert summary["policy_version"] >= 2
    assert (Path(cfg.train_dir) / cfg.experiment / "checkpoints" / "last.ckpt").exists()


@pytest.mark.slow
def test_tanh_squashed_actions_train(tmp_path):
    cfg = make_cfg(tmp_path, "env=mujoco/humanoid", *SMALL, "model.tanh_squash_actions=true",
                   "hardware.serial_mode=true", "train_for_env_steps=600")
    summary = train(cfg)
    assert summary["env_steps"] >= 600 and summary["policy_version"] >= 2


class ActionRecorder(gym.Wrapper):
    """Test instrumentation: remembers what actually reached env.step."""

    def __init__(self, env):
        super().__init__(env)
        self.received = []

    def step(self, action):
        self.received.append(np.array(action, copy=True))
        return self.env.step(action)


def sample_one_rollout(cfg):
    """One real rollout in serial mode; returns (sampler, its trajectories, the recorders)."""
    check_config(cfg)
    plan = plan_run(cfg, describe_env(cfg.env, seed=cfg.seed))
    model = plan.initial_policies[0]
    sampler = Sampler(plan.sampler, plan.spec, plan.spaces, model)
    sampler.start()
    worker = sampler.serial_workers[0]
    worker.envs = [ActionRecorder(env) for env in worker.envs]
    return sampler, model, sampler.poll(), worker.envs


@pytest.mark.parametrize("squash", [False, True], ids=["clip", "tanh_squash"])
def test_sampler_stores_samples_and_env_receives_them_in_bounds(tmp_path, squash):
    cfg = make_cfg(tmp_path, "env=mujoco/humanoid", "hardware.serial_mode=true", "hardware.num_workers=1", *SMALL[1:],
                   "algo.batch_size=64", "algo.num_batches_per_epoch=1", "hardware.num_envs_per_worker=2",
                   f"model.tanh_squash_actions={squash}", "model.initial_stddev=2.0")
    sampler, model, traj, recorders = sample_one_rollout(cfg)
    try:
        low, high = recorders[0].action_space.low, recorders[0].action_space.high  # Humanoid: +-0.4
        slots = torch.tensor(traj.slots)
        stored = sampler.buffers["actions"][slots]  # [envs, T, 17]
        received = np.stack([np.stack(r.received) for r in recorders])  # [envs, T, 17]
        assert received.shape == stored.shape
        assert (received >= low).all() and (received <= high).all()
        np.testing.assert_array_equal(received, np.clip(stored.numpy(), low, high))
        outside = (stored.numpy() < low) | (stored.numpy() > high)
        assert outside.any() != squash  # std 2 in a +-0.4 box: plain samples leave it, squashed never do
        # The stored log-probs are those of the stored (unclipped) samples under the acting policy.
        obs = {k: v[slots] for k, v in obs_fields_of(sampler.buffers.tensors).items()}
        with torch.no_grad():
            log_probs, _, _ = model.evaluate(obs, stored, None, None)
        torch.testing.assert_close(log_probs, sampler.buffers["log_probs"][slots], rtol=1e-5, atol=1e-4)
    finally:
        sampler.stop()


@pytest.mark.long
def test_default_halfcheetah_reaches_1500_within_1m_steps(tmp_path):
    """The family's learning bar with the shipped defaults (a few minutes on 2 cores)."""
    from tests.conftest import compose_cfg

    cfg = compose_cfg(f"train_dir={tmp_path}", "env=mujoco/halfcheetah", "train_until_avg_return=1500")
    summary = train(cfg)
    assert summary["env_steps"] <= 1_010_000
    assert summary["avg_return"] >= 1500, summary
