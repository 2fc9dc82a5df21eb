"""The learner on CUDA (hardware.device=cuda): a batch gathered into pinned staging memory
reaches the device in one non-blocking copy per field, and the device computes the same
advantages, value targets and gradients as the CPU learner from the same weights and batch.
The CPU half (gathering into staging memory) runs everywhere; the CUDA half needs a GPU."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.core.trajectory import TrajectoryBuffers, model_trajectory_spec, trajectory_spec
from sf_hydra.learner.ppo_learner import PPOLearner
from tests.helpers.plans import learner_for, with_trainer

ROWS, T = 8, 8
OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(2)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _learner(tmp_cfg, device: str) -> PPOLearner:
    cfg = tmp_cfg("env=gym/cartpole", "model.use_rnn=true", "model.rnn_size=16", f"algo.rollout={T}",
                  "algo.recurrence=4", "algo.normalize_returns=true")
    torch.manual_seed(0)  # the same initial weights on both devices
    return with_trainer(learner_for(cfg, OBS, ACTIONS), "gpu" if device == "cuda" else "cpu").to(device)


def _buffers(learner: PPOLearner) -> TrajectoryBuffers:
    """Shared slots holding random trajectories of every field of the learner's spec."""
    spec = model_trajectory_spec(OBS, ACTIONS, learner.model)
    buffers = TrajectoryBuffers.allocate(spec, ROWS * 2, T)
    g = torch.Generator().manual_seed(1)
    for name, t in buffers.tensors.items():
        if name == "actions":
            t.copy_(torch.randint(0, 2, t.shape, generator=g))
        elif name == "dones":
            t.copy_((torch.rand(t.shape, generator=g) < 0.15).float())
        elif name == "log_probs":
            t.copy_(-0.69 + 0.1 * torch.randn(t.shape, generator=g))
        elif t.dtype.is_floating_point and name != "time_outs":
            t.copy_(torch.randn(t.shape, generator=g))
    return buffers


def test_a_batch_gathered_into_staging_memory_is_the_plain_gather():
    buffers = TrajectoryBuffers.allocate(trajectory_spec(OBS, ACTIONS, rnn_state_size=16), ROWS, T)
    for t in buffers.tensors.values():
        t.copy_(torch.arange(t.numel()).reshape(t.shape).to(t.dtype))
    slots = torch.tensor([5, 1, 6])
    staging = buffers.staging(ROWS, pin=False)
    staged = buffers.gather(slots, out=staging)
    for name, plain in buffers.gather(slots).items():
        assert torch.equal(staged[name], plain), name
        assert staged[name].data_ptr() == staging[name].data_ptr(), name  # written in place, no new tensor


@pytest.mark.gpu
@needs_cuda
def test_the_cuda_learner_computes_the_cpu_learners_update(tmp_cfg):
    cpu, gpu = _learner(tmp_cfg, "cpu"), _learner(tmp_cfg, "cuda")
    buffers = _buffers(cpu)
    slots = torch.arange(ROWS)
    staged = buffers.gather(slots, out=buffers.staging(ROWS, pin=True))
    assert all(t.is_pinned() for t in staged.values())
    on_gpu = gpu.transfer_batch_to_device({**staged, "meta": {"policy": 0}}, torch.device("cuda"), 0)
    assert on_gpu["meta"] == {"policy": 0}
    assert all(v.is_cuda for k, v in on_gpu.items() if k != "meta")
    updates = []
    for learner, batch in ((cpu, buffers.gather(slots)), (gpu, on_gpu)):
        adv, targets, old_values = learner._advantages_and_targets(learner.model, batch, None, 0.99)
        data = learner._chunks(batch, adv, targets, old_values, None)
        stats = learner._accumulate_gradients(learner.model, data, learner.hyperparams[0])
        grads = {n: p.grad.cpu() for n, p in learner.model.named_parameters() if p.grad is not None}
        updates.append((adv.cpu(), targets.cpu(), stats, grads))
    (adv_c, tgt_c, stats_c, grads_c), (adv_g, tgt_g, stats_g, grads_g) = updates
    torch.testing.assert_close(adv_g, adv_c, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(tgt_g, tgt_c, rtol=1e-4, atol=1e-5)
    assert grads_c.keys() == grads_g.keys() and grads_c
    for name in grads_c:
        torch.testing.assert_close(grads_g[name], grads_c[name], rtol=1e-3, atol=1e-5, msg=name)
    for key in stats_c:
        assert float(stats_g[key]) == pytest.approx(float(stats_c[key]), rel=1e-3, abs=1e-5), key
