"""With several policies a batch may hold another policy's transitions (a row's policy changes at an
episode's end, so one trajectory can hold both). A policy trains on its own transitions only: the chunks
that hold none of them are left out before the minibatches (learner/minibatches.py minibatch_bounds), so no forward
or backward pass is spent on them; an epoch keeps the whole batch's count of minibatches; the update is
the one the masked rows gave."""

import math

import gymnasium as gym
import lightning as L
import numpy as np
import pytest
import torch

from sf_hydra.learner.minibatches import minibatch_bounds
from tests.helpers.plans import learner_for, random_cartpole_batch

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROLLOUT = 16
ROWS = 8  # trajectories in the batch: 128 transitions


def _learner(tmp_cfg, *overrides: str):
    """A two-policy CartPole learner in a bare Trainer, started as fit starts it."""
    cfg = tmp_cfg("env=gym/cartpole", "algo.num_policies=2", "hardware.num_workers=2", f"algo.rollout={ROLLOUT}",
                  "algo.num_epochs=2", *overrides)
    torch.manual_seed(0)
    learner = learner_for(cfg, gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False)
    trainer.strategy.connect(learner)
    learner.trainer = trainer
    learner.log = lambda *a, **k: None  # no fit loop to log into
    trainer.strategy.optimizers = learner.configure_optimizers()
    learner.on_train_start()
    return learner


def chunks_per_minibatch(learner) -> int:
    """A minibatch's recurrence chunks, as the learner lays its epochs out."""
    return learner.algo.batch_size // learner.recurrence


def _batch(learner) -> dict:
    """ROWS trajectories for policy 0: rows 0-4 wholly its own, rows 5-6 switch from policy 1 to policy 0 at
    a done in step 9, row 7 wholly policy 1's."""
    batch = random_cartpole_batch(learner, ROWS, ROLLOUT)
    batch["dones"][5:7, 9] = 1.0
    batch["policy_ids"][5:7, :10] = 1
    batch["policy_ids"][7] = 1
    return batch


def _own_transitions(batch) -> int:
    return int((batch["policy_ids"] == 0).sum())


def _step(learner, batch) -> None:
    meta = {"frames": batch["actions"].numel(), "episodes": [], "games": [], "nonfinite_replaced": 0,
            "env_restarts": 0, "dropped_trajectories": 0, "wait_seconds": 0.0, "worker_seconds": {}, "policy": 0,
            "policy_frames": [batch["actions"].numel(), 0]}
    learner.training_step({**batch, "meta": meta}, 0)


def _rows_seen(learner) -> list:
    """The rows of each forward pass through policy 0's first layer, as it happens."""
    seen = []
    first = next(m for m in learner.policies[0].modules() if isinstance(m, torch.nn.Linear))
    first.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].shape[0]))
    return seen


def test_no_forward_pass_sees_another_policys_transitions(tmp_cfg):
    learner = _learner(tmp_cfg, "algo.batch_size=32")  # 4 minibatches an epoch
    batch = _batch(learner)
    seen = _rows_seen(learner)
    _step(learner, batch)
    own = _own_transitions(batch)  # 5 x 16 + 2 x 6 = 92 of 128
    assert own == 92
    assert sum(seen) == own * 2  # every own transition once an epoch, nothing else
    assert len(seen) == 4 * 2 and sorted(set(seen)) == [23]  # the whole batch's 4 minibatches, even
    assert math.isfinite(learner.stats[0].metrics["loss/total"]) and learner.stats[0].version == 1


def test_the_update_is_the_masked_update(tmp_cfg):
    """One minibatch over the batch (batch_size = all of it): the kept chunks alone give the masked batch's
    gradient, so the weights after both epochs agree to float rounding."""
    runs = []
    for drop in (True, False):
        learner = _learner(tmp_cfg, f"algo.batch_size={ROWS * ROLLOUT}", "algo.shuffle_minibatches=false")
        batch = _batch(learner)
        valid = learner._valid(batch, 0)
        advantages, targets, old_values = learner._advantages_and_targets(learner.model, batch, valid, 0.99)
        data = learner._chunks(batch, advantages, targets, old_values, valid)
        n = data["actions"].shape[0]
        data, bounds = minibatch_bounds(data, chunks_per_minibatch(learner)) if drop else (data, [0, n])
        assert ("valids" in data) is not drop
        learner._train_epochs(learner.model, learner.optimizer_of(0), learner.stats[0], data, learner.hyperparams[0],
                              bounds)
        runs.append({k: v.detach().clone() for k, v in learner.model.state_dict().items()})
    dropped, masked = runs
    untrained = _learner(tmp_cfg).model.state_dict()
    assert any(not torch.equal(untrained[k], v) for k, v in dropped.items())  # it learned
    for name, value in masked.items():
        torch.testing.assert_close(dropped[name], value, rtol=1e-5, atol=1e-6, msg=name)


def test_minibatch_bounds(tmp_cfg):
    learner = _learner(tmp_cfg, "algo.batch_size=16")  # 16 chunks of one transition a minibatch
    per = chunks_per_minibatch(learner)
    mine = torch.ones(64, 1)
    data, bounds = minibatch_bounds({"actions": torch.zeros(64, 1)}, per)
    assert bounds == [0, 16, 32, 48, 64] and data["actions"].shape[0] == 64  # one policy's batch: as it was
    data, bounds = minibatch_bounds({"actions": torch.arange(64.0)[:, None], "valids": mine}, per)
    assert bounds == [0, 16, 32, 48, 64] and "valids" not in data  # all its own: the plain slices
    mine[::4] = 0
    data, bounds = minibatch_bounds({"actions": torch.arange(64.0)[:, None], "valids": mine}, per)
    assert bounds == [0, 12, 24, 36, 48] and "valids" not in data  # 4 minibatches of its 48
    assert data["actions"][:4, 0].tolist() == [1.0, 2.0, 3.0, 5.0]
    mine[:61] = 0
    data, bounds = minibatch_bounds({"actions": torch.arange(64.0)[:, None], "valids": mine}, per)
    assert bounds == [0, 1, 2, 3] and data["actions"][:, 0].tolist() == [61.0, 62.0, 63.0]
    data, bounds = minibatch_bounds({"actions": torch.arange(64.0)[:, None], "valids": mine * 0}, per)
    assert bounds == [0] and data["actions"].shape[0] == 0


def test_recurrent_chunks_keep_their_mask(tmp_cfg):
    """Chunks of 4 steps (an RNN's recurrence): a chunk with any of its own steps stays whole, masked."""
    learner = _learner(tmp_cfg, "algo.batch_size=32", "model.use_rnn=true", "algo.recurrence=4")
    assert learner.recurrence == 4
    per = chunks_per_minibatch(learner)
    valids = torch.ones(16, 4)
    valids[3] = 0  # another's wholly
    valids[5, :2] = 0  # a policy switch inside the chunk
    data, bounds = minibatch_bounds({"actions": torch.arange(16.0)[:, None].expand(16, 4), "valids": valids}, per)
    assert data["actions"].shape[0] == 15 and 3.0 not in data["actions"][:, 0].tolist()
    assert data["valids"][4].tolist() == [0.0, 0.0, 1.0, 1.0]  # chunk 5, now the fifth
    assert bounds == [0, 7, 15]  # 2 minibatches of 8 chunks for the whole batch: its 15 spread over them


def test_a_longer_batch_gets_a_full_batchs_minibatches(tmp_cfg):
    """With several policies a batch may take more trajectories than a full one, until it holds a full
    batch's count of the policy's own transitions (sampler/training_batches.py): its epochs keep a full
    batch's count of minibatches (what one policy's batches get), spread over its own transitions, not the
    count its whole length would give."""
    learner = _learner(tmp_cfg, "algo.batch_size=16")  # num_batches_per_epoch 2: a full batch is 32 chunks
    per = chunks_per_minibatch(learner)
    mine = torch.ones(40, 1)
    mine[::7] = 0  # 6 of another policy's: 34 of its own
    data = {"actions": torch.arange(40.0)[:, None], "valids": mine}
    data, bounds = minibatch_bounds(data, per, full_chunks=32)
    assert bounds == [0, 17, 34] and "valids" not in data
    data, bounds = minibatch_bounds({"actions": torch.arange(40.0)[:, None], "valids": mine}, per)
    assert bounds == [0, 11, 22, 34]  # without full_chunks: the 3 minibatches 40 chunks give
    data, bounds = minibatch_bounds({"actions": torch.zeros(36, 1)}, per, full_chunks=32)
    assert bounds == [0, 18, 36]  # all its own (no valids), yet longer than a full batch: 2 minibatches
    data, bounds = minibatch_bounds({"actions": torch.zeros(32, 1)}, per, full_chunks=32)
    assert bounds == [0, 16, 32]  # a full batch: the plain slices
