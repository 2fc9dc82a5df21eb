"""What a PBT replacement does to the rest of the run, on the real learner and the real PBT callback
(learner/pbt.py): the replaced policy has no objective until it finishes an episode with its new weights,
and the looks at every other policy go on without it (each look, decided or skipped, is an event)."""

import json
import logging
from types import SimpleNamespace

import gymnasium as gym
import pytest

from sf_hydra.learner.pbt import PopulationBasedTraining
from tests.helpers.plans import learner_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OBS = gym.spaces.Box(-1.0, 1.0, (4,))
# One best (policy 0) and one worst; a donor must lead by 60% of its own objective (50 against 100 does not).
RULES = ("algo.num_policies=3", "pbt.with_pbt=true", "pbt.mutation_rate=0.0", "pbt.replace_fraction=0.3",
         "pbt.replace_reward_gap=0.6", "pbt.replace_reward_gap_absolute=1.0")


class RecordingDoor:
    """The sampler's door as PBT uses it: what was published, under which version."""

    def __init__(self):
        self.published = []

    def publish(self, policy, model, version):
        self.published.append((policy, version))

    def publish_replacement(self, policy, model, version):
        self.published.append((policy, version))

    def set_reward_shaping(self, policy, difference):
        pass


def population(tmp_cfg, tmp_path, returns):
    """The real learner of RULES' three CartPole policies, each with one episode of the given true
    return (None: none yet), its optimizers built without a Trainer; the PBT callback started on it."""
    cfg = tmp_cfg(*RULES)
    learner = learner_for(cfg, OBS, gym.spaces.Discrete(2))
    learner.configure_optimizers()
    for k, ret in enumerate(returns):
        if ret is not None:
            finish_episode(learner, k, ret)
    trainer = SimpleNamespace(datamodule=SimpleNamespace(door=RecordingDoor()))
    pbt = PopulationBasedTraining(cfg.pbt, tmp_path / "run", cfg.seed)
    pbt.on_train_start(trainer, learner)
    return learner, trainer, pbt


def finish_episode(learner, k, ret):
    """Policy k's learner window gets one episode of return `ret`, as LearnerStatistics.record adds it."""
    stats = learner.stats[k]
    stats.episode_returns.append(ret)
    stats.true_returns.append(ret)
    stats.episode_lengths.append(10)


def events(tmp_path):
    return [json.loads(line) for line in (tmp_path / "run" / "pbt" / "events.jsonl").read_text().splitlines()]


def test_a_replaced_policy_is_left_out_of_the_ranking_and_its_own_look_is_skipped_with_an_event(tmp_cfg, tmp_path,
                                                                                                 caplog):
    """Policy 2 is replaced by policy 0: its windows are emptied, its objective is None. The next look at
    policy 1 still ranks it against policy 0 (policy 2 left out, said in the event); the look at policy 2
    itself is skipped, in events.jsonl and the log; once it finished an episode it is ranked again."""
    learner, trainer, pbt = population(tmp_cfg, tmp_path, [100.0, 50.0, 1.0])
    pbt._look_at(trainer, learner, 2, 1000)
    assert learner.statistics.objective(2, "true_objective") is None  # the replaced policy's windows start empty
    caplog.set_level(logging.INFO, logger="sf_hydra")
    pbt._look_at(trainer, learner, 1, 1000)
    pbt._look_at(trainer, learner, 2, 2000)
    finish_episode(learner, 2, 120.0)
    pbt._look_at(trainer, learner, 2, 3000)
    looks = events(tmp_path)
    assert [(e["policy"], e["action"]) for e in looks] == [
        (2, "replaced"), (1, "mutated"), (2, "skipped (no objective)"), (2, "kept (best)")]
    assert looks[1]["left_out"] == [2] and looks[1]["objectives"] == {"0": 100.0, "1": 50.0, "2": None}
    assert looks[2]["left_out"] == [2] and looks[2]["objective"] is None and looks[2]["env_steps"] == 2000
    assert "left_out" not in looks[3]  # every member has an objective again
    assert "look at policy 2 at 2000 env steps skipped" in caplog.text


def test_a_look_with_no_other_objective_is_skipped_with_an_event(tmp_cfg, tmp_path):
    """Only the looked-at policy has an episode: there is nobody to rank it against (an event says so)."""
    learner, trainer, pbt = population(tmp_cfg, tmp_path, [None, 5.0, None])
    pbt._look_at(trainer, learner, 1, 1000)
    [look] = events(tmp_path)
    assert look["action"] == "skipped (no other objective)" and look["left_out"] == [0, 2]
    assert trainer.datamodule.door.published == [] and learner.policy_versions == [0, 0, 0]
