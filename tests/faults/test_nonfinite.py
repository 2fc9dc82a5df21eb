"""NaN and infinity never reach a checkpoint: an env's non-finite reward or observation is
named (env, field, step) or, with env.nonfinite=replace, replaced and counted; a learner
update whose loss or gradient is not finite is skipped, and too many in a row stop the run
with its finite state saved; inf returns satisfy no stop condition; summary.json is strict JSON."""

import json
import math

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.core.faults import NonFiniteTraining
from sf_hydra.report.tensorboard import read_scalars
from sf_hydra.sampler.sampler import SamplerError
from tests.conftest import make_cfg

ENV = ("env=gym/any", "env.id=tests.helpers.nonfinite_envs:NonFiniteCartPole-v0")


def _finite_checkpoint(run) -> dict:
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert all(torch.isfinite(t).all() for t in ckpt["state_dict"].values() if t.is_floating_point())
    return ckpt


@pytest.mark.slow
@pytest.mark.parametrize("field, named", [("reward", "reward (nan)"), ("obs", "observation 'obs'")])
def test_a_non_finite_env_value_is_named_with_env_field_and_step(tmp_path, field, named):
    cfg = make_cfg(tmp_path, *ENV, "+env.kwargs.after=300", f"+env.kwargs.field={field}",
                   "train_for_env_steps=1000000")
    with pytest.raises(SamplerError) as failure:
        train(cfg)
    message = str(failure.value)
    assert "NonFiniteCartPole-v0" in message and f"non-finite {named}" in message
    assert "at step" in message and "rollout worker" in message and "env.nonfinite=replace" in message
    _finite_checkpoint(tmp_path / "test")


@pytest.mark.slow
def test_replaced_non_finite_values_are_counted_and_training_goes_on(tmp_path):
    cfg = make_cfg(tmp_path, *ENV, "+env.kwargs.after=100", "+env.kwargs.every=20", "env.nonfinite=replace",
                   "train_for_env_steps=8000")
    summary = train(cfg)
    assert summary["env_steps"] >= 8000
    counted = read_scalars(tmp_path / "test")["env/nonfinite_values"]
    assert counted[-1].value > 0
    _finite_checkpoint(tmp_path / "test")


@pytest.mark.slow
def test_inf_rewards_satisfy_no_target_and_the_summary_is_strict_json(tmp_path):
    cfg = make_cfg(tmp_path, *ENV, "+env.kwargs.after=1", "+env.kwargs.every=1", "+env.kwargs.value=inf",
                   "env.nonfinite=replace", "env.reward_clip=inf", "env.reward_scale=1.0",
                   "train_until_avg_return=100", "logger.stats_avg=5", "train_for_env_steps=4000")
    summary = train(cfg)
    assert summary["stop_reason"].startswith("train_for_env_steps")
    json.loads((tmp_path / "test" / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(c))


@pytest.mark.slow
def test_diverging_updates_are_skipped_then_stop_the_run_with_finite_weights(tmp_path):
    """Rewards scaled to 1e38 with no clip: returns overflow to inf, every loss is NaN. No
    update is applied, and after algo.nonfinite_updates_limit of them the run stops; its
    checkpoint holds the finite initial weights."""
    cfg = make_cfg(tmp_path, "env.reward_scale=1e38", "env.reward_clip=inf", "algo.nonfinite_updates_limit=3",
                   "train_for_env_steps=100000")
    with pytest.raises(NonFiniteTraining, match=r"3 learner updates in a row .*algo\.nonfinite_updates_limit=3"):
        train(cfg)
    ckpt = _finite_checkpoint(tmp_path / "test")
    assert math.isfinite(ckpt["sf_hydra"]["env_steps"])
