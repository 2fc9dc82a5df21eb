"""Each rank's sampler gets a seed and cores of its own (seeding.rank_seed, plan.plan_for_rank); the learner's
part of the plan is the same on every rank."""

import gymnasium as gym

from sf_hydra.core.seeding import env_seed, rank_seed
from sf_hydra.plan import plan_for_rank
from tests.conftest import make_cfg
from tests.helpers.plans import plan_for


def test_every_rank_samples_with_a_seed_and_cores_of_its_own(tmp_path):
    env = gym.make("CartPole-v1")
    plan = plan_for(make_cfg(tmp_path, "seed=7", "hardware.devices=4", "hardware.num_workers=2"),
                    env.observation_space, env.action_space)
    plans = [plan_for_rank(plan, r, r) for r in range(4)]
    seeds = [p.sampler.workers.seed for p in plans]
    assert seeds[0] == 7 and len(set(seeds)) == 4  # rank 0 keeps the run's seed: a 1-rank run is unchanged
    envs = {env_seed(s, w, i) for s in seeds for w in range(2) for i in range(16)}
    assert len(envs) == 4 * 2 * 16  # no env seeded twice across the ranks
    assert [p.sampler.workers.process.first_core for p in plans] == [0, 2, 4, 6]  # after the ranks before it
    assert all(p.learner is plan.learner and p.initial_policies is plan.initial_policies for p in plans)
    assert rank_seed(None, 3) is None  # unseeded stays unseeded


def test_every_rank_infers_on_its_own_gpu(tmp_path):
    env = gym.make("CartPole-v1")
    plan = plan_for(make_cfg(tmp_path, "hardware.devices=2", "hardware.inference=server",
                             "hardware.inference_device=cuda"), env.observation_space, env.action_space)
    assert plan_for_rank(plan, 0, 0).sampler.workers.acting.inference_device == "cuda"
    assert plan_for_rank(plan, 1, 1).sampler.workers.acting.inference_device == "cuda:1"
