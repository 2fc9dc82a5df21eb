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
