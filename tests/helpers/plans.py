"""Learners and samplers for tests, built as train.py builds them: from the run's plan."""

from __future__ import annotations

from typing import Optional

from sf_hydra.plan import RunPlan, plan_run
from sf_hydra.sampler.env_info import EnvInfo


def plan_for(cfg, obs_space, action_space, num_agents: Optional[int] = None) -> RunPlan:
    return plan_run(cfg, EnvInfo(obs_space, action_space, num_agents))


def learner_for(cfg, obs_space, action_space, num_agents: Optional[int] = None):
    """A PPOLearner of the config's policies for these spaces (not fitted: no sampler)."""
    from sf_hydra.learner.ppo_learner import PPOLearner

    plan = plan_for(cfg, obs_space, action_space, num_agents)
    return PPOLearner(plan.initial_policies, plan.learner, plan.spec)


def with_trainer(learner, accelerator: str = "cpu"):
    """The learner attached to a bare Lightning Trainer (no logger, no checkpoints), so training_step and
    manual_backward run when a test calls them by hand; returns the learner."""
    import lightning as L

    trainer = L.Trainer(accelerator=accelerator, devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False)
    trainer.strategy.connect(learner)
    learner.trainer = trainer
    return learner


def sampler_for(cfg, plan: RunPlan):
    """The plan's Sampler, not started, its stores holding the plan's initial policies (version 0)."""
    from sf_hydra.sampler.sampler import Sampler

    return Sampler(plan.sampler, plan.spec, plan.spaces, plan.initial_policies[0])


def random_cartpole_batch(learner, rows: int, rollout: int) -> dict:
    """A [rows, rollout] training batch of every field of the learner's spec for CartPole (2 actions): random
    actions, episode ends at 5%, behaviour log-probs near log(1/2), other floats standard normal, ints 0."""
    import torch

    g = torch.Generator().manual_seed(1)
    batch = {}
    for field in learner.spec:
        shape = (rows, field.steps(rollout), *field.shape)
        if field.name == "actions":
            batch[field.name] = torch.randint(0, 2, shape, generator=g).to(field.dtype)
        elif field.name in ("dones", "time_outs"):
            batch[field.name] = (torch.rand(shape, generator=g) < 0.05).float()
        elif field.dtype.is_floating_point:
            batch[field.name] = torch.randn(shape, generator=g).to(field.dtype)
        else:
            batch[field.name] = torch.zeros(shape, dtype=field.dtype)
    batch["log_probs"] = -0.69 + 0.1 * batch["log_probs"]
    return batch
