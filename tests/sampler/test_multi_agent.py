"""Multi-agent envs through the real sampler (worker processes, shared buffers), on our toy
env whose observation names the agent, its episode step and whether it is inactive.

What must hold: one row per agent; inactive transitions never recorded; each row holds its
agent's active steps in order, restarting at step 0 after each done (per-agent
auto-reset); a done that happened while the agent was inactive lands on its last active
step; the RNN state skips inactive steps exactly as the learner's unroll does; a short
training learns the cue."""

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.envs.multi_agent.toy import MultiAgentToyEnv
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg
from tests.sampler.collect import collect

TOY = MultiAgentToyEnv()  # the defaults conf/env/gym/multi_agent_toy.yaml uses
SCHEDULES = [[t for t in range(TOY.lengths[a]) if not TOY.inactive_at(a, t)] for a in range(TOY.num_agents)]


def _fields(obs: torch.Tensor):
    """cue, inactive flag, agent index and episode step of toy observations [..., 8]."""
    return obs[..., :3].argmax(-1), obs[..., 3], obs[..., 4:7].argmax(-1), obs[..., 7].long()


def test_rows_hold_each_agents_active_steps_in_order(tmp_path):
    got = collect(make_cfg(tmp_path, "env=gym/multi_agent_toy", "hardware.num_envs_per_worker=2"), min_slots=60)
    b = got.batch
    assert b["obs.obs"].shape[1:] == (16, 8) and b["actions"].shape[1:] == (16,) and b["values"].shape[1:] == (17,)
    cue, inactive, agent, step = _fields(b["obs.obs"])
    assert set(agent[:, 0].tolist()) == {0, 1, 2}  # every agent has rows
    assert (inactive == 0).all(), "an inactive transition was recorded"
    assert (agent == agent[:, :1]).all(), "a row mixes agents"
    dones = b["dones"].bool()
    for row in range(len(step)):
        schedule = SCHEDULES[int(agent[row, 0])]
        for k in range(step.shape[1]):
            # Done exactly at the agent's last active step, also for agent 2 whose episode ends while inactive.
            assert bool(dones[row, k]) == (int(step[row, k]) == schedule[-1]), (row, k, step[row].tolist())
            if k + 1 < step.shape[1]:
                expected = 0 if dones[row, k] else schedule[schedule.index(int(step[row, k])) + 1]
                assert int(step[row, k + 1]) == expected, (row, k, step[row].tolist())
    assert torch.equal(b["rewards"], (b["actions"] == cue).float())


def test_episode_statistics_per_agent(tmp_path):
    got = collect(make_cfg(tmp_path, "env=gym/multi_agent_toy", "hardware.num_workers=1",
                           "hardware.num_envs_per_worker=2"), min_slots=24)
    lengths = [length for _, length, *_ in got.episodes]
    # Lengths count active steps: 8 for agent 0, 10 for agents 1 and 2 (11 and 14 env steps).
    assert sorted(set(lengths)) == [8, 10]
    assert all(0 <= ret <= length for ret, length, *_ in got.episodes)
    # Frames count every agent's env steps, inactive ones too: 2 envs x 3 agents per step.
    assert got.frames % 6 == 0 and got.frames >= 24 * 16


def test_rnn_state_skips_inactive_steps_as_the_learner_does(tmp_path):
    cfg = make_cfg(tmp_path, "env=gym/multi_agent_toy", "model.use_rnn=true", "model.rnn_size=32",
                   "hardware.num_envs_per_worker=2")
    got = collect(cfg, min_slots=36)
    b = got.batch
    step = _fields(b["obs.obs"])[3]
    assert ((step[:, 1:] - step[:, :-1]) > 1).any(), "no row crossed an inactive period"
    assert b["rnn_states"][:, 0].abs().sum(-1).gt(0).any(), "no slot started with a carried-over state"
    with torch.no_grad():
        log_probs, _, values = got.model.evaluate({"obs": b["obs.obs"]}, b["actions"], b["rnn_states"][:, 0],
                                                  b["dones"])
    torch.testing.assert_close(log_probs, b["log_probs"], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(values, b["values"][:, :-1], atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_sync_mode_sends_one_slot_per_row_each_round(tmp_path):
    # 2 workers x 4 envs x 3 agents = 24 rows of 16 steps: one round feeds 3 iterations of 128,
    # trained by versions v, v+1, v+2 on data of version v (lag <= 2). A row's partly filled
    # slot is sent in the next round, trained by v+3..v+5: lag <= 5. Unbounded lag or a round
    # that never completes (a deadlock) fail here.
    cfg = make_cfg(tmp_path, "env=gym/multi_agent_toy", "algo=ppo", "train_for_env_steps=4000",
                   "train_until_avg_return=null")
    summary = train(cfg)
    assert summary["env_steps"] >= 4000 and summary["episodes"] > 0
    assert max(s.value for s in read_scalars(tmp_path / "test")["policy_lag/max"]) <= 5.0


@pytest.mark.slow
def test_short_training_learns_the_cue(tmp_path):
    cfg = make_cfg(tmp_path, "env=gym/multi_agent_toy", "train_for_env_steps=60000", "train_until_avg_return=7.5")
    summary = train(cfg)
    # Random play averages ~3.1 per agent episode; naming every cue averages ~9.1.
    assert summary["avg_return"] >= 7.5, summary
