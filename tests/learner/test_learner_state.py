"""What a checkpoint keeps of the learner beside its weights, its `sf_hydra` part: the statistics
(LearnerStatistics.state) and each policy's hyperparameters (PolicyOptimizers.state). Checkpoints written by
earlier versions hold these keys, so a resume restores them as saved and the next save writes them unchanged;
one saved before several policies (no `policies`, the weights under `model.`) restores as policy 0."""

import gymnasium as gym
import numpy as np
import pytest

from tests.helpers.plans import learner_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OBS, ACTIONS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2)


def policy_state(version: int, env_steps: int) -> dict:
    return {"version": version, "env_steps": env_steps, "episode_returns": [1.0, 2.0 + version],
            "true_returns": [1.0, 2.0], "episode_lengths": [5, 6], "episodes_total": 2, "outcomes": ["win"],
            "episode_extra": {"score": [3.0]}}


def test_a_saved_learner_part_restores_and_saves_again_unchanged(tmp_cfg):
    learner = learner_for(tmp_cfg("algo.num_policies=2"), OBS, ACTIONS)
    hyperparams = [dict(learner.hyperparams[0]), {**learner.hyperparams[1], "learning_rate": 0.123}]
    saved = {"policy_version": 7, "env_steps": 300, "train_seconds": 12.5, "episode_returns": [1.0, 2.0],
             "episode_lengths": [5, 6], "episodes_total": 4, "policies": [policy_state(3, 100), policy_state(4, 200)],
             "hyperparams": hyperparams}
    learner.on_load_checkpoint({"sf_hydra": saved, "state_dict": learner.state_dict()})
    assert (learner.env_steps, learner.train_seconds, learner.policy_versions) == (300, 12.5, [3, 4])
    assert learner.hyperparams[1]["learning_rate"] == 0.123 and learner.avg_return() == 1.5
    assert learner.statistics.objective(1, "score") == 3.0
    again = {}
    learner.on_save_checkpoint(again)
    assert again["sf_hydra"] == saved


def test_a_part_saved_before_several_policies_restores_as_policy_0(tmp_cfg):
    learner = learner_for(tmp_cfg(), OBS, ACTIONS)
    weights = {"model." + name[len("policies.0."):]: value for name, value in learner.state_dict().items()}
    checkpoint = {"state_dict": weights, "sf_hydra": {
        "policy_version": 5, "env_steps": 400, "train_seconds": 3.0, "episode_returns": [7.0],
        "episode_lengths": [9], "episodes_total": 1}}
    learner.on_load_checkpoint(checkpoint)
    learner.load_state_dict(checkpoint["state_dict"])
    assert learner.policy_versions == [5] and learner.stats[0].env_steps == 400
    assert learner.stats[0].avg_return() == 7.0 and learner.stats[0].avg_true_return() == 7.0
