"""A real PettingZoo Parallel API env (butterfly's Knights-Archers-Zombies, where an agent
touched by a zombie or the wall is out before the others) through our adapter and the
real sampler."""

import numpy as np
import pytest

pytest.importorskip("pettingzoo.butterfly", reason="the multiagent extra (pettingzoo[butterfly]) is not installed")

from sf_hydra.app.train import train  # noqa: E402
from sf_hydra.envs.multi_agent.pettingzoo import make_pettingzoo_env  # noqa: E402
from tests.conftest import make_cfg  # noqa: E402
from tests.sampler.collect import collect  # noqa: E402

KAZ = "pettingzoo.butterfly.knights_archers_zombies_v11"
# Agents die at the wall: episodes end at different steps for different agents.
QUICK = ("env=gym/pettingzoo_kaz", "+env.kwargs.env_kwargs.line_death=true", "env.kwargs.env_kwargs.max_cycles=50")


def test_agents_done_early_stay_inactive_until_all_are_done():
    env = make_pettingzoo_env(KAZ, env_kwargs={"line_death": True, "max_cycles": 150}, flatten_obs=True)
    assert env.num_agents == 4 and env.observation_space.shape == (135,) and env.observation_space.dtype == np.float32
    obs, infos = env.reset(seed=1)
    active = np.array([i["is_active"] for i in infos])
    rng = np.random.default_rng(1)
    waited, resets = 0, 0
    for _ in range(1500):
        obs, rewards, terminated, truncated, infos = env.step([int(rng.integers(6)) for _ in range(4)])
        done = np.logical_or(terminated, truncated)
        assert not done[~active].any(), "an inactive agent reported a done"
        assert not np.asarray(rewards)[~active].any(), "an inactive agent was rewarded"
        now_active = np.array([i["is_active"] for i in infos])
        if now_active.all() and not (active & ~done).all():  # the episode restarted for everyone
            resets += 1
            assert (done | ~active).all(), "the env restarted while an agent was still playing"
        else:
            assert (now_active == (active & ~done)).all(), "an agent done early must stay inactive"
            waited += int((~now_active).any())
        assert all(o.shape == (135,) and o.dtype == np.float32 for o in obs)
        active = now_active
    assert resets >= 3 and waited > 0, (resets, waited)


def test_pettingzoo_env_through_the_sampler(tmp_path):
    got = collect(make_cfg(tmp_path, *QUICK, "hardware.num_envs_per_worker=2"), min_slots=192, timeout=120)
    assert got.batch["obs.obs"].shape[1:] == (16, 135)
    assert set(got.batch["actions"].unique().tolist()) <= set(range(6))
    # Episode lengths count each agent's own (active) steps, so they differ between agents (192 slots:
    # about 40 agent episodes in 10 games, enough that one agent leaves early).
    lengths = [length for _, length, *_ in got.episodes]
    assert len(lengths) >= 8 and len(set(lengths)) > 1 and max(lengths) <= 50
    assert got.frames % 4 == 0  # 4 agents per env step, inactive ones included


@pytest.mark.slow
def test_pettingzoo_env_trains_end_to_end(tmp_path):
    summary = train(make_cfg(tmp_path, *QUICK, "hardware.num_envs_per_worker=2", "train_for_env_steps=2000"))
    assert summary["env_steps"] >= 2000 and summary["episodes"] > 0 and summary["policy_version"] > 0
