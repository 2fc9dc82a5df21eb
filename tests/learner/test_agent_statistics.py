"""Multi-agent envs: TensorBoard shows each agent's episode return and length
(`episode/agent_<i>/...`) besides the pooled `episode/return`. On our toy env the agents'
episodes differ on purpose: agent 0 has 8 active steps per episode, agents 1 and 2 have 10
(see sf_hydra/envs/multi_agent/toy.py), and a reward is at most 1 per active step."""

import pytest

from sf_hydra.app.train import train
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg
from tests.sampler.collect import collect

ACTIVE_STEPS = {0: 8, 1: 10, 2: 10}


def test_sampler_names_the_agent_of_each_episode(tmp_path):
    got = collect(make_cfg(tmp_path, "env=gym/multi_agent_toy", "hardware.num_workers=1",
                           "hardware.num_envs_per_worker=2"), min_slots=24)
    assert {(e.agent, e.length) for e in got.episodes} == set(ACTIVE_STEPS.items())


def test_single_agent_episodes_name_no_agent(tmp_path):
    got = collect(make_cfg(tmp_path, "hardware.num_workers=1"), min_slots=16)
    assert got.episodes and all(episode.agent is None for episode in got.episodes)


@pytest.mark.slow
def test_tensorboard_has_per_agent_returns(tmp_path):
    summary = train(make_cfg(tmp_path, "env=gym/multi_agent_toy", "train_for_env_steps=3000",
                             "train_until_avg_return=null"))
    scalars = read_scalars(tmp_path / "test")
    for agent, active_steps in ACTIVE_STEPS.items():
        lengths = [s.value for s in scalars[f"episode/agent_{agent}/length"]]
        returns = [s.value for s in scalars[f"episode/agent_{agent}/return"]]
        assert lengths and all(v == active_steps for v in lengths), (agent, lengths)
        assert all(0 <= v <= active_steps for v in returns), (agent, returns)
    assert "episode/agent_3/return" not in scalars
    # The pooled statistics stay: averages over all agents' episodes.
    assert 8 <= scalars["episode/length"][-1].value <= 10
    assert summary["episodes"] > 0


@pytest.mark.slow
def test_single_agent_runs_have_no_per_agent_scalars(short_cartpole_run):
    train_dir = short_cartpole_run[0]
    scalars = read_scalars(train_dir / "test")
    assert "episode/return" in scalars and not any(tag.startswith("episode/agent_") for tag in scalars)
