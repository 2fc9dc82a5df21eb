"""Splitting a minibatch into micro-batches (hardware.learner_micro_batch) must give the
same gradient and the same statistics as one pass over the whole minibatch."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.learner.ppo_learner import PPOLearner
from sf_hydra.plan import resolved_learner_bf16, resolved_micro_batch
from tests.helpers.plans import learner_for, with_trainer

ROWS, T = 8, 4


def _learner(tmp_cfg, micro: int) -> PPOLearner:
    cfg = tmp_cfg("env=gym/cartpole", "model.use_rnn=true", "model.rnn_size=16", f"algo.rollout={T}",
                  f"hardware.learner_micro_batch={micro}")
    torch.manual_seed(0)
    obs_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    return with_trainer(learner_for(cfg, obs_space, gym.spaces.Discrete(2)))


def _minibatch(state_size: int) -> dict:
    g = torch.Generator().manual_seed(1)
    dones = (torch.rand(ROWS, T, generator=g) < 0.2).float()
    return {
        "obs.obs": torch.randn(ROWS, T, 4, generator=g), "actions": torch.randint(0, 2, (ROWS, T), generator=g),
        "log_probs": torch.full((ROWS, T), -0.69) + 0.1 * torch.randn(ROWS, T, generator=g), "dones": dones,
        "advantages": torch.randn(ROWS, T, generator=g), "targets": torch.randn(ROWS, T, generator=g),
        "old_values": torch.randn(ROWS, T, generator=g), "policy_versions": torch.zeros(ROWS, T),
        "rnn_states": torch.randn(ROWS, state_size, generator=g),
    }


def test_micro_batches_give_the_whole_minibatch_gradient(tmp_cfg):
    whole, split = _learner(tmp_cfg, 0), _learner(tmp_cfg, T * 3)  # 3 rows, 3 rows, 2 rows
    mb = _minibatch(whole.model.rnn_state_size)
    stats_whole = whole._accumulate_gradients(whole.model, mb, whole.hyperparams[0])
    stats_split = split._accumulate_gradients(split.model, mb, split.hyperparams[0])
    for (name, a), b in zip(whole.model.named_parameters(), split.model.parameters()):
        assert a.grad is not None, name
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name)
    assert stats_whole.keys() == stats_split.keys()
    for key in stats_whole:
        assert float(stats_split[key]) == pytest.approx(float(stats_whole[key]), rel=1e-4, abs=1e-6), key


def test_auto_micro_batch_splits_only_image_observations_on_cpu(tmp_cfg):
    cfg = tmp_cfg("env=gym/cartpole", "algo.rollout=32", "model.use_rnn=true")
    image = gym.spaces.Box(0, 255, (3, 72, 128), np.uint8)
    bf16 = resolved_learner_bf16("auto", "cpu", image)  # bf16 forward passes: larger micro-batches paid
    assert learner_for(cfg, image, gym.spaces.Discrete(2)).micro_batch == (512 if bf16 else 256)
    fp32 = tmp_cfg("env=gym/cartpole", "algo.rollout=32", "model.use_rnn=true", "hardware.learner_precision=fp32")
    assert learner_for(fp32, image, gym.spaces.Discrete(2)).micro_batch == 256
    assert resolved_micro_batch(-1, 32, "cpu", image, bf16=True) == 512
    assert resolved_micro_batch(-1, 96, "cpu", image, bf16=True) == 480
    assert learner_for(cfg, gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2)).micro_batch == 0
    assert resolved_micro_batch(-1, 96, "cpu", image) == 192  # whole recurrence chunks
    assert resolved_micro_batch(-1, 32, "cuda", image) == 0 and resolved_micro_batch(64, 32, "cpu", image) == 64
