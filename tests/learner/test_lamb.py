"""The Lamb optimizer (learner/lamb.py) against the paper's Algorithm 2 written in numpy, its
layer-wise trust ratio, and `algo.optimizer_type` choosing it."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.config import ConfigError, validate
from sf_hydra.learner.lamb import Lamb
from sf_hydra.learner.optimizers import apply_to_optimizer
from tests.helpers.plans import learner_for

UNBOUNDED = {"max_weight_norm": float("inf"), "min_trust": 0.0}  # phi = identity


def lamb_reference(x0, grads, lr, beta1, beta2, eps, weight_decay, max_weight_norm=np.inf, min_trust=0.0):
    """arXiv 1904.00962, Algorithm 2 (with the bias correction), one layer; phi(||x||) =
    min(||x||, max_weight_norm) and the ratio clipped to [min_trust, 1 / min_trust] (no bound at 0)."""
    x, m, v = x0.copy(), np.zeros_like(x0), np.zeros_like(x0)
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
        r = m_hat / (np.sqrt(v_hat) + eps) + weight_decay * x
        trust = min(np.linalg.norm(x), max_weight_norm) / np.linalg.norm(r)
        if min_trust > 0:
            trust = min(max(trust, min_trust), 1 / min_trust)
        x = x - lr * trust * r
    return x


@pytest.mark.parametrize("weight_decay,bounds", [(0.0, UNBOUNDED), (0.01, UNBOUNDED), (1e-4, {})],
                         ids=["phi_identity", "phi_identity_decay", "sample_factorys_bounds"])
def test_lamb_follows_the_papers_algorithm(weight_decay, bounds):
    rng = np.random.default_rng(0)
    # a layer of norm ~35 (over SF's cap of 10), one of ~2, one of ~1e-4 (its ratio under SF's 0.01)
    layers = [rng.normal(size=(3, 4)) * 10, rng.normal(size=5), rng.normal(size=6) * 4e-5]
    grads = [[rng.normal(size=w.shape) * s for s in (1.0, 10.0, 0.1, 3.0)] for w in layers]
    params = [torch.nn.Parameter(torch.tensor(w)) for w in layers]
    opt = Lamb(params, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=weight_decay, **bounds)
    for step in range(4):
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g[step])
        opt.step()
    ref_bounds = {"max_weight_norm": 10.0, "min_trust": 0.01, **bounds}
    for p, w, g in zip(params, layers, grads):
        ref = lamb_reference(w, g, 0.01, 0.8, 0.99, 1e-6, weight_decay, **ref_bounds)
        np.testing.assert_allclose(p.detach().numpy(), ref, rtol=1e-10, atol=1e-12)


def test_sample_factorys_bounds_by_hand():
    """Defaults: a layer of norm 20 moves by lr x 10 (phi caps the norm); a layer of norm 1e-4 whose
    update has norm 1 moves by lr x 0.01 x 1 (the ratio's lower bound), not lr x 1e-4."""
    big, tiny = torch.nn.Parameter(torch.full((4,), 10.0)), torch.nn.Parameter(torch.tensor([1e-4, 0.0]))
    opt = Lamb([big, tiny], lr=0.1, weight_decay=0.0)
    before = [big.detach().clone(), tiny.detach().clone()]
    big.grad, tiny.grad = torch.ones(4), torch.tensor([3.0, 0.0])  # first Adam step: r = sign(g), ||r|| = 2 and 1
    opt.step()
    assert torch.linalg.vector_norm(big.detach() - before[0]).item() == pytest.approx(0.1 * 10.0, rel=1e-5)
    assert torch.linalg.vector_norm(tiny.detach() - before[1]).item() == pytest.approx(0.1 * 0.01, rel=1e-5)


def test_each_layer_moves_by_lr_times_its_norm_whatever_the_gradient_scale():
    """The trust ratio: without weight decay ||step|| = lr ||x||, per layer, for tiny or huge gradients."""
    torch.manual_seed(0)
    big, small = torch.nn.Parameter(torch.randn(50) * 10), torch.nn.Parameter(torch.randn(7) * 0.01)
    opt = Lamb([big, small], lr=0.05, weight_decay=0.0, **UNBOUNDED)
    before = [big.detach().clone(), small.detach().clone()]
    big.grad, small.grad = torch.randn(50) * 1e4, torch.randn(7) * 1e-4
    opt.step()
    for p, x in zip((big, small), before):
        step = torch.linalg.vector_norm(p.detach() - x)
        assert step.item() == pytest.approx(0.05 * torch.linalg.vector_norm(x).item(), rel=1e-5)


def test_a_zero_layer_takes_the_plain_adam_step():
    """||x|| = 0 (a bias at its zero initialization): trust ratio 1, the step is lr * m_hat / (sqrt(v_hat) + eps)."""
    bias = torch.nn.Parameter(torch.zeros(3))
    opt = Lamb([bias], lr=0.1, eps=1e-8)
    bias.grad = torch.tensor([2.0, -0.5, 0.0])
    opt.step()
    torch.testing.assert_close(bias.detach(), torch.tensor([-0.1, 0.1, 0.0]), atol=1e-6, rtol=0)


def test_lamb_fits_a_least_squares_problem():
    torch.manual_seed(0)
    a, truth = torch.randn(64, 5), torch.randn(5, 1)
    y = a @ truth
    model = torch.nn.Linear(5, 1, bias=False)
    opt = Lamb(model.parameters(), lr=0.02)
    first = None
    for _ in range(300):
        opt.zero_grad()
        loss = ((model(a) - y) ** 2).mean()
        first = first if first is not None else loss.item()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-3 * first


def test_state_dict_resumes_the_same_trajectory():
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(4))
    grads = [torch.randn(4) for _ in range(6)]
    opt = Lamb([p], lr=0.01)
    for g in grads[:3]:
        p.grad = g
        opt.step()
    q = torch.nn.Parameter(p.detach().clone())
    resumed = Lamb([q], lr=0.01)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))
    for g in grads[3:]:
        p.grad, q.grad = g, g.clone()
        opt.step()
        resumed.step()
    torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=0)


@pytest.mark.parametrize("kwargs", [{"lr": 0.0}, {"betas": (1.0, 0.9)}, {"eps": 0.0}, {"weight_decay": -1.0},
                                    {"max_weight_norm": 0.0}, {"min_trust": 1.5}])
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError, match="Lamb"):
        Lamb([torch.nn.Parameter(torch.zeros(1))], **kwargs)


# -- algo.optimizer_type -----------------------------------------------------------------------

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def test_optimizer_type_lamb_builds_lamb_with_the_adam_keys(tmp_cfg):
    cfg = tmp_cfg("algo.optimizer_type=lamb", "algo.learning_rate=0.002", "algo.adam_eps=1e-7",
                  "algo.adam_beta1=0.8", "algo.adam_beta2=0.99")
    validate(cfg)
    learner = learner_for(cfg, OBS, gym.spaces.Discrete(2))
    [opt] = learner.configure_optimizers()
    group = opt.param_groups[0]
    assert type(opt) is Lamb
    assert (group["lr"], group["eps"], tuple(group["betas"])) == (0.002, 1e-7, (0.8, 0.99))
    # PBT's per-policy hyperparameters reach Lamb's group like Adam's
    apply_to_optimizer(opt, {**learner.hyperparams[0], "adam_beta1": 0.7, "learning_rate": 0.01})
    assert group["lr"] == 0.01 and group["betas"] == (0.7, 0.99)


def test_default_optimizer_type_is_adam(tmp_cfg):
    [opt] = learner_for(tmp_cfg(), OBS, gym.spaces.Discrete(2)).configure_optimizers()
    assert type(opt) is torch.optim.Adam


def test_own_target_wins_and_contradicting_optimizer_type_is_refused(tmp_cfg):
    own = tmp_cfg("algo.optimizer._target_=torch.optim.AdamW")
    validate(own)
    [opt] = learner_for(own, OBS, gym.spaces.Discrete(2)).configure_optimizers()
    assert type(opt) is torch.optim.AdamW
    with pytest.raises(ConfigError, match=r"^algo.optimizer_type='lamb' is not allowed: adam .*torch.optim.AdamW"):
        validate(tmp_cfg("algo.optimizer._target_=torch.optim.AdamW", "algo.optimizer_type=lamb"))
    validate(tmp_cfg("algo.optimizer._target_=sf_hydra.learner.lamb.Lamb", "algo.optimizer_type=lamb"))


def test_unknown_optimizer_type_is_refused_when_composing(tmp_cfg):
    with pytest.raises(Exception, match="sgd"):
        tmp_cfg("algo.optimizer_type=sgd")


def test_a_state_saved_before_the_bounds_loads_with_this_instances_bounds():
    p = torch.nn.Parameter(torch.randn(4))
    opt = Lamb([p], lr=0.01)
    p.grad = torch.randn(4)
    opt.step()
    old = copy.deepcopy(opt.state_dict())
    for group in old["param_groups"]:
        del group["max_weight_norm"], group["min_trust"]
    resumed = Lamb([torch.nn.Parameter(p.detach().clone())], lr=0.01, max_weight_norm=5.0)
    resumed.load_state_dict(old)
    assert resumed.param_groups[0]["max_weight_norm"] == 5.0 and resumed.param_groups[0]["min_trust"] == 0.01
    resumed.param_groups[0]["params"][0].grad = torch.randn(4)
    resumed.step()
