"""A fresh run's rollout workers collect while the learner is still being built (train.py
launch_sampler): they act with the weights the learner starts from, each slot is handed out once,
and a resumed run's workers wait for the learner's first publish."""

import copy
import time
from contextlib import contextmanager

import pytest
import torch

from sf_hydra.app.train import launch_sampler
from sf_hydra.config import validate
from sf_hydra.core.seeding import seed_everything
from sf_hydra.learner.ppo_learner import PPOLearner
from sf_hydra.plan import plan_run
from sf_hydra.sampler.env_info import describe_env
from tests.helpers.plans import sampler_for


def test_the_learner_trains_the_policies_the_workers_act_with(tmp_cfg):
    """The plan builds each policy once: the learner trains those modules, the workers' stores hold
    their weights, and the same seed gives the same weights."""
    cfg = tmp_cfg("algo.num_policies=2", "model.use_rnn=true", "model.rnn_size=16")
    env = describe_env(cfg.env, seed=0)
    seed_everything(0)
    plan = plan_run(cfg, env)
    learner = PPOLearner(plan.initial_policies, plan.learner, plan.spec)
    assert len(plan.initial_policies) == 2
    assert all(a is b for a, b in zip(learner.policies, plan.initial_policies))
    sampler = sampler_for(cfg, plan)
    for k, model in enumerate(plan.initial_policies):
        sampler.publish(k, model, 0)  # as launch_sampler does
        acting = copy.deepcopy(model)
        for p in acting.parameters():
            p.data.zero_()
        sampler.stores[k].load_into(acting)
        for name, tensor in model.state_dict().items():
            assert torch.equal(tensor, acting.state_dict()[name]), (k, name)
    first, second = (dict(m.named_parameters()) for m in plan.initial_policies)
    assert any(not torch.equal(first[n], second[n]) for n in first)  # each policy its own draw
    seed_everything(0)
    again = plan_run(cfg, env)
    for model, same in zip(plan.initial_policies, again.initial_policies):
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), same.state_dict().values()))


def _poll_for(sampler, seconds: float) -> list:
    got, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        traj = sampler.poll(0.2)
        if traj is not None:
            got.append(traj)
    return got


@contextmanager
def _launched(tmp_cfg, fresh_run: bool, *overrides: str):
    """A sampler launched as train.py launches it (no learner); stopped on exit."""
    cfg = tmp_cfg(*overrides)
    validate(cfg)
    plan = plan_run(cfg, describe_env(cfg.env, seed=0))
    sampler = launch_sampler(plan, hand_out_slots=fresh_run)
    try:
        yield sampler
    finally:
        sampler.stop()


@pytest.mark.slow
def test_a_fresh_runs_workers_collect_before_the_learner_starts_and_use_each_slot_once(tmp_cfg):
    overrides = ("hardware.num_workers=2", "hardware.num_envs_per_worker=4", "algo.rollout=16")
    with _launched(tmp_cfg, True, *overrides) as sampler:
        early = []
        deadline = time.monotonic() + 60
        while not early and time.monotonic() < deadline:  # no start(): nobody handed slots out but the launch
            early += _poll_for(sampler, 0.5)
        assert early, "no trajectory from a fresh run's workers before start()"
        assert all(int(v) == 0 for t in early for v in sampler.buffers["policy_versions"][t.slots].flatten())
        sampler.start()
        in_use = set()
        for traj in early + _poll_for(sampler, 2.0):
            assert not in_use & set(traj.slots), "a slot reported twice before it was freed"
            in_use |= set(traj.slots)
        assert len(in_use) <= sampler.num_workers * sampler.per_worker
        sampler.free(sorted(in_use))
        assert _poll_for(sampler, 2.0), "the workers stopped after their slots came back"


@pytest.mark.slow
def test_a_resumed_runs_workers_wait_for_the_learners_weights(tmp_cfg):
    overrides = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.rollout=8")
    with _launched(tmp_cfg, False, *overrides) as sampler:
        assert not _poll_for(sampler, 4.0)  # built and ready, but no slots until start()
        sampler.start()
        assert _poll_for(sampler, 2.0)
