"""What a training_step does to cost less CPU must leave the update as it was: the fused Adam
(fused_if_default) gives the default implementation's weights to float rounding, and the backward
stays Lightning's (a user's backward hooks run)."""

import gymnasium as gym
import lightning as L
import numpy as np
import torch

import sf_hydra.learner.optimizers as optimizers
from tests.helpers.plans import learner_for, random_cartpole_batch

ROLLOUT = 16
OVERRIDES = ("env=gym/cartpole", f"algo.rollout={ROLLOUT}", "algo.batch_size=128", "algo.num_batches_per_epoch=2",
             "algo.num_epochs=2", "algo.shuffle_minibatches=true")


class CountsBackward(L.Callback):
    """A user's callback with a backward hook: Lightning's path must run it."""

    def __init__(self):
        self.calls = 0

    def on_after_backward(self, trainer, pl_module):
        self.calls += 1


def _trained(tmp_cfg, callbacks=(), steps: int = 3):
    """A CartPole learner in a bare Trainer, started as fit starts it, after `steps` training_steps on one fixed
    batch (the same torch seed for every call, so two calls differ only by the code path)."""
    cfg = tmp_cfg(*OVERRIDES)
    torch.manual_seed(0)
    learner = learner_for(cfg, gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, callbacks=list(callbacks))
    trainer.strategy.connect(learner)
    learner.trainer = trainer
    learner.log = lambda *a, **k: None  # no fit loop to log into
    trainer.strategy.optimizers = learner.configure_optimizers()
    learner.on_train_start()
    batch = random_cartpole_batch(learner, 128 * 2 // ROLLOUT, ROLLOUT)
    for _ in range(steps):
        meta = {"frames": batch["actions"].numel(), "episodes": [], "games": [], "nonfinite_replaced": 0,
                "env_restarts": 0, "dropped_trajectories": 0, "wait_seconds": 0.0, "worker_seconds": {}, "policy": 0}
        learner.training_step({**batch, "meta": meta}, 0)
    return learner


def _weights(learner) -> dict:
    return {k: v.detach().clone() for k, v in learner.model.state_dict().items()}


def test_default_adam_is_fused_and_updates_as_the_default_implementation(tmp_cfg, monkeypatch):
    fused = _trained(tmp_cfg)
    assert fused.optimizer_of(0).optimizer.param_groups[0]["fused"] is True
    monkeypatch.setattr(optimizers, "fused_if_default", lambda opt: opt)
    default = _trained(tmp_cfg)
    assert default.optimizer_of(0).optimizer.param_groups[0]["fused"] is None
    for name, value in _weights(default).items():
        torch.testing.assert_close(_weights(fused)[name], value, rtol=0, atol=1e-6, msg=name)
    initial = _weights(_trained(tmp_cfg, steps=0))
    assert any(not torch.equal(initial[name], value) for name, value in _weights(fused).items())  # it learned


def test_an_optimizer_chosen_by_the_user_is_kept():
    params = [torch.nn.Parameter(torch.zeros(3))]
    explicit = torch.optim.Adam(params, foreach=False)
    assert optimizers.fused_if_default(explicit) is explicit
    sgd = torch.optim.SGD(params, lr=0.1)
    assert optimizers.fused_if_default(sgd) is sgd
    rebuilt = optimizers.fused_if_default(torch.optim.Adam(params, lr=0.003, eps=1e-6, betas=(0.8, 0.99)))
    group = rebuilt.param_groups[0]
    assert (group["fused"], group["lr"], group["eps"], group["betas"]) == (True, 0.003, 1e-6, (0.8, 0.99))


def test_a_loaded_state_keeps_the_fused_kernel():
    params = [torch.nn.Parameter(torch.ones(3))]
    fused = optimizers.fused_if_default(torch.optim.Adam(params, lr=0.5))
    saved = torch.optim.Adam([torch.nn.Parameter(torch.ones(3))], lr=0.25).state_dict()  # an older checkpoint's
    optimizers.load_optimizer_state(fused, saved)
    assert fused.param_groups[0]["fused"] is True and fused.param_groups[0]["lr"] == 0.25


def test_a_callbacks_backward_hook_runs(tmp_cfg):
    counter = CountsBackward()
    _trained(tmp_cfg, callbacks=[counter], steps=1)
    assert counter.calls == 4  # 2 epochs x 2 minibatches
