"""The odds a snapshot takes in the sampler when it joins the opponent pool (learner/opponent_pool.py),
on the real pool callback, league, door and sampler (not started): the league's own value for a snapshot
nobody has played yet, the same as every other unplayed snapshot's, never even odds of 1 beside them."""

import json
from types import SimpleNamespace

import pytest

from sf_hydra.core.game_results import Game
from sf_hydra.learner.league import priority, win_rate
from sf_hydra.learner.opponent_pool import OpponentPool
from sf_hydra.sampler.env_info import describe_env
from sf_hydra.sampler.sampler_door import Door
from tests.helpers.plans import learner_for, sampler_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOY_2 = ("env=gym/multi_agent_toy", "env.kwargs.num_agents=2")


def pool_run(tmp_cfg, tmp_path, sampling):
    """(pool callback started, trainer whose datamodule holds the door, learner, sampler) of a one-policy
    self-play run with a pool of 2 slots and `sampling` odds."""
    cfg = tmp_cfg(*TOY_2, "selfplay.pool_size=2", f"selfplay.opponent_sampling={sampling}")
    info = describe_env(cfg.env, seed=cfg.seed)
    learner = learner_for(cfg, info.observation_space, info.action_space, info.num_agents)
    from tests.helpers.plans import plan_for

    sampler = sampler_for(cfg, plan_for(cfg, info.observation_space, info.action_space, info.num_agents))
    trainer = SimpleNamespace(datamodule=SimpleNamespace(door=Door(sampler)), logger=None, loggers=[])
    pool = OpponentPool(tmp_path / "selfplay", {"pool_size": 2, "snapshot_every_env_steps": 1000,
                                                "opponent_sampling": sampling, "pfsp_exponent": 2.0})
    pool.on_train_start(trainer, learner)
    return pool, trainer, learner, sampler


def slot_odds(sampler, slot):
    """Per trained policy, the odds the workers read for pool slot `slot`."""
    return sampler.stores[sampler.num_policies + slot].odds.tolist()


@pytest.mark.parametrize("sampling", ["hard", "variance"])
def test_a_new_snapshot_joins_with_the_leagues_odds_for_an_unplayed_snapshot(tmp_cfg, tmp_path, sampling):
    """Snapshot 1 is beaten in every game, so its odds fall below the unplayed value; snapshot 2 then joins:
    its odds are the league's for a snapshot with no game (p = 1/2: 0.25 under both), not 1.0, which made
    the new snapshot four times as likely as an unplayed one until the next game was rated."""
    pool, trainer, learner, sampler = pool_run(tmp_cfg, tmp_path, sampling)
    unplayed = priority(win_rate([]), sampling, 2.0)
    assert unplayed == pytest.approx(0.25)
    first = pool.snapshot(trainer, learner, 0)
    assert slot_odds(sampler, first) == pytest.approx([unplayed])
    for _ in range(20):  # policy 0 (id 0) beats snapshot 1 (pool slot `first`: id 1 + first)
        learner.statistics.games.append(Game((0, 1 + first), (0, 1), (5.0, 0.0)))
    pool._rate(trainer, learner)
    beaten = slot_odds(sampler, first)[0]
    assert beaten < unplayed
    second = pool.snapshot(trainer, learner, 0)
    assert second != first and slot_odds(sampler, second) == pytest.approx([unplayed])
    assert slot_odds(sampler, first) == pytest.approx([beaten])


def test_restored_snapshots_take_their_saved_odds(tmp_cfg, tmp_path):
    """A resumed run publishes its pool's snapshots again: each with the odds its restored record gives."""
    pool, trainer, learner, sampler = pool_run(tmp_cfg, tmp_path, "hard")
    slot = pool.snapshot(trainer, learner, 0)
    for _ in range(20):
        learner.statistics.games.append(Game((0, 1 + slot), (0, 1), (5.0, 0.0)))
    pool._rate(trainer, learner)
    pool._save_ratings()
    saved = slot_odds(sampler, slot)
    assert json.loads((tmp_path / "selfplay" / "ratings.json").read_text())["state"]["recent"]
    _, _, _, resumed = pool_run(tmp_cfg, tmp_path, "hard")
    assert slot_odds(resumed, slot) == pytest.approx(saved) and saved[0] < 0.25
