"""GAE, the PPO losses and the model pieces the learner relies on, against plain references."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch.distributions import Categorical, Independent, Normal

from sf_hydra.config.schema import ModelConfig
from sf_hydra.learner.advantages import gae
from sf_hydra.learner.losses import approx_kl, entropy_loss, policy_loss, value_loss
from sf_hydra.models.action_heads import make_action_head
from sf_hydra.models.cores import RnnCore
from sf_hydra.models.normalizer import RunningMeanStd

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- GAE --------------------------------------------------------------------------------------


def gae_reference(rewards, values, dones, gamma, lam):
    """The definition read forwards: A_t = sum_k (gamma*lam)^(k-t) delta_k over the steps k >= t
    of the same episode (stopping at the first done), delta_k = r_k + gamma*V_{k+1}*(1-d_k) - V_k."""
    n, steps = rewards.shape
    adv = np.zeros((n, steps))
    for b in range(n):
        for t in range(steps):
            total, weight = 0.0, 1.0
            for k in range(t, steps):
                delta = rewards[b, k] + gamma * values[b, k + 1] * (1.0 - dones[b, k]) - values[b, k]
                total += weight * delta
                if dones[b, k]:
                    break
                weight *= gamma * lam
            adv[b, t] = total
    return adv, adv + values[:, :steps]


def discounted_returns(rewards, values, dones, gamma):
    """Monte-Carlo return to the episode's end, bootstrapped with V_T when the rollout cuts it."""
    n, steps = rewards.shape
    out = np.zeros((n, steps))
    for b in range(n):
        for t in range(steps):
            total, discount = 0.0, 1.0
            for k in range(t, steps):
                total += discount * rewards[b, k]
                discount *= gamma
                if dones[b, k]:
                    break
            else:
                total += discount * values[b, steps]
            out[b, t] = total
    return out


def random_trajectories(seed, n=6, steps=9):
    """Rows 0-3 (if n allows) are special cases, the others random."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(n, steps))
    values = rng.normal(size=(n, steps + 1))
    dones = (rng.random((n, steps)) < 0.2).astype(np.float64)
    if n < 4:
        return rewards, values, dones
    dones[0] = 0.0  # never ends: bootstraps from V_T
    dones[1] = 0.0
    dones[1, steps // 2] = 1.0  # ends in the middle only
    dones[2] = 0.0
    dones[2, -1] = 1.0  # ends at the last step: V_T unused
    dones[3] = 1.0  # one-step episodes
    return rewards, values, dones


def run_gae(rewards, values, dones, gamma, lam, dtype=torch.float64):
    adv, ret = gae(torch.tensor(rewards, dtype=dtype), torch.tensor(values, dtype=dtype),
                   torch.tensor(dones, dtype=dtype), gamma, lam)
    return adv.numpy(), ret.numpy()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 0.5), (0.5, 1.0), (1.0, 1.0), (0.99, 0.0), (0.0, 0.7)])
def test_gae_matches_reference(seed, gamma, lam):
    rewards, values, dones = random_trajectories(seed)
    adv, ret = run_gae(rewards, values, dones, gamma, lam)
    ref_adv, ref_ret = gae_reference(rewards, values, dones, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ret, ref_ret, rtol=1e-10, atol=1e-10)


def test_gae_float32():
    rewards, values, dones = random_trajectories(7)
    adv, ret = run_gae(rewards, values, dones, 0.99, 0.95, dtype=torch.float32)
    ref_adv, ref_ret = gae_reference(rewards, values, dones, 0.99, 0.95)
    assert adv.dtype == np.float32
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ret, ref_ret, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_gae_lambda_zero_is_td0(seed):
    rewards, values, dones = random_trajectories(seed)
    gamma = 0.97
    adv, ret = run_gae(rewards, values, dones, gamma, 0.0)
    td0 = rewards + gamma * values[:, 1:] * (1.0 - dones) - values[:, :-1]
    np.testing.assert_allclose(adv, td0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ret, rewards + gamma * values[:, 1:] * (1.0 - dones), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("gamma", [0.9, 1.0])
def test_gae_lambda_one_is_discounted_return_minus_value(seed, gamma):
    rewards, values, dones = random_trajectories(seed)
    adv, ret = run_gae(rewards, values, dones, gamma, 1.0)
    returns = discounted_returns(rewards, values, dones, gamma)
    np.testing.assert_allclose(ret, returns, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(adv, returns - values[:, :-1], rtol=1e-10, atol=1e-10)


def test_gae_gamma_zero_is_reward_minus_value():
    rewards, values, dones = random_trajectories(3)
    adv, ret = run_gae(rewards, values, dones, 0.0, 0.95)
    np.testing.assert_allclose(adv, rewards - values[:, :-1], atol=1e-12)
    np.testing.assert_allclose(ret, rewards, atol=1e-12)


def test_gae_by_hand():
    # Two episodes in one rollout: the first ends after step 1, the second is cut after step 2.
    rewards = np.array([[1.0, 1.0, 1.0]])
    values = np.array([[0.5, 0.5, 0.5, 2.0]])
    dones = np.array([[0.0, 1.0, 0.0]])
    adv, ret = run_gae(rewards, values, dones, 0.9, 0.8)
    # delta_2 = 1 + 0.9*2 - 0.5 = 2.3; delta_1 = 1 - 0.5 = 0.5; delta_0 = 1 + 0.9*0.5 - 0.5 = 0.95
    # A_0 = 0.95 + 0.9*0.8*0.5 = 1.31
    np.testing.assert_allclose(adv, [[1.31, 0.5, 2.3]], atol=1e-12)
    np.testing.assert_allclose(ret, [[1.81, 1.0, 2.8]], atol=1e-12)


def test_gae_does_not_look_past_a_done():
    rewards, values, dones = random_trajectories(11, n=1, steps=8)
    dones[:] = 0.0
    dones[0, 3] = 1.0
    adv, _ = run_gae(rewards, values, dones, 0.99, 0.95)
    changed_values, changed_rewards = values.copy(), rewards.copy()
    changed_values[0, 4:] += 100.0  # the next episode's values and the bootstrap
    changed_rewards[0, 4:] -= 50.0
    adv2, _ = run_gae(changed_rewards, changed_values, dones, 0.99, 0.95)
    np.testing.assert_allclose(adv2[0, :4], adv[0, :4], atol=1e-12)
    assert not np.allclose(adv2[0, 4:], adv[0, 4:])


def test_gae_done_at_last_step_ignores_bootstrap():
    rewards, values, dones = random_trajectories(5, n=3)
    dones[:, -1] = 1.0
    adv, ret = run_gae(rewards, values, dones, 0.99, 0.95)
    values[:, -1] = 1e6
    adv2, ret2 = run_gae(rewards, values, dones, 0.99, 0.95)
    np.testing.assert_array_equal(adv, adv2)
    np.testing.assert_array_equal(ret, ret2)


# -- policy loss ------------------------------------------------------------------------------


def policy_loss_reference(log_probs, old_log_probs, advantages, eps):
    ratio = np.exp(log_probs - old_log_probs)
    low, high = 1.0 / (1.0 + eps), 1.0 + eps
    clipped = np.clip(ratio, low, high)
    loss = -np.mean(np.minimum(ratio * advantages, clipped * advantages))
    clip_fraction = np.mean((ratio < low) | (ratio > high))
    return loss, ratio, clip_fraction


@pytest.mark.parametrize("eps", [0.1, 0.2, 0.5])
def test_policy_loss_matches_formula(eps):
    rng = np.random.default_rng(0)
    lp, olp, adv = rng.normal(size=500) * 0.3, rng.normal(size=500) * 0.3, rng.normal(size=500)
    loss, ratio, frac = policy_loss(torch.tensor(lp), torch.tensor(olp), torch.tensor(adv), eps)
    ref_loss, ref_ratio, ref_frac = policy_loss_reference(lp, olp, adv, eps)
    assert loss.item() == pytest.approx(ref_loss, rel=1e-10)
    np.testing.assert_allclose(ratio.numpy(), ref_ratio, rtol=1e-12)
    assert frac.item() == pytest.approx(ref_frac)
    assert 0.0 < frac.item() < 1.0  # the test data exercises both sides


def test_policy_loss_unbiased_clip_by_hand():
    eps = 0.1
    ratios = torch.tensor([2.0, 2.0, 0.5, 0.5, 1.05, 0.95, 0.905, 0.895])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, -1.0, -1.0])
    loss, ratio, frac = policy_loss(torch.log(ratios), torch.zeros(8), adv, eps)
    # min(r*A, clip(r, 1/1.1, 1.1)*A) per sample: the lower bound is 1/1.1 = 0.909.., not 0.9.
    per_sample = torch.tensor([1.1, -2.0, 0.5, -1 / 1.1, 1.05, -0.95, -1 / 1.1, -1 / 1.1])
    torch.testing.assert_close(ratio, ratios)
    assert loss.item() == pytest.approx(-per_sample.mean().item(), rel=1e-6)
    assert frac.item() == pytest.approx(6 / 8)  # 2, 2, 0.5, 0.5, 0.905 and 0.895 are outside [0.909, 1.1]


def test_policy_loss_gradient_is_zero_where_clipped():
    eps = 0.2
    log_ratio = torch.log(torch.tensor([1.5, 1.5, 0.7, 0.7, 1.0])).requires_grad_()
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0, 1.0])
    loss, _, _ = policy_loss(log_ratio, torch.zeros(5), adv, eps)
    loss.backward()
    grad = log_ratio.grad
    # Clipped and the clipped term is the smaller one: ratio above 1+e with A>0, below 1/(1+e) with A<0.
    assert grad[0] == 0.0 and grad[2] == 0.0
    # Otherwise d(-r*A/n)/d(log r) = -r*A/n.
    torch.testing.assert_close(grad[[1, 3, 4]], -torch.tensor([1.5 * -1.0, 0.7 * 1.0, 1.0]) / 5)


# -- value loss -------------------------------------------------------------------------------


def value_loss_reference(values, old_values, targets, clip):
    clipped = old_values + np.clip(values - old_values, -clip, clip)
    return np.mean(np.maximum((values - targets) ** 2, (clipped - targets) ** 2))  # no 1/2, as SF's


def test_value_loss_matches_formula():
    rng = np.random.default_rng(1)
    v, old, tgt = rng.normal(size=300) * 2, rng.normal(size=300) * 2, rng.normal(size=300) * 2
    for clip in (0.1, 1.0, 10.0):
        got = value_loss(torch.tensor(v), torch.tensor(old), torch.tensor(tgt), clip).item()
        assert got == pytest.approx(value_loss_reference(v, old, tgt, clip), rel=1e-10)


def test_value_loss_within_clip_is_plain_mse():
    v, old, tgt = torch.tensor([0.3, -0.2]), torch.tensor([0.0, 0.0]), torch.tensor([2.0, 1.0])
    assert value_loss(v, old, tgt, 1.0).item() == pytest.approx(((1.7**2) + (1.2**2)) / 2)


def test_value_loss_clipped_behaviour():
    old, tgt = torch.tensor([0.0]), torch.tensor([10.0])
    # Moving 5 towards the target with clip 1: the clipped estimate (1.0) is worse and is used, no gradient.
    v = torch.tensor([5.0], requires_grad=True)
    loss = value_loss(v, old, tgt, 1.0)
    assert loss.item() == pytest.approx(81.0)
    loss.backward()
    assert v.grad.item() == 0.0
    # Moving away from the target: the unclipped error is the larger one and is used.
    v = torch.tensor([-5.0], requires_grad=True)
    loss = value_loss(v, old, tgt, 1.0)
    assert loss.item() == pytest.approx(225.0)
    loss.backward()
    assert v.grad.item() == pytest.approx(-30.0)


def test_entropy_loss():
    assert entropy_loss(torch.tensor([1.0, 2.0, 3.0])).item() == pytest.approx(-2.0)


# -- approx KL --------------------------------------------------------------------------------


def test_approx_kl_is_zero_for_ratio_one():
    assert approx_kl(torch.ones(100)).item() == 0.0
    assert abs(approx_kl(1.0 + 1e-4 * torch.randn(100, generator=torch.Generator().manual_seed(0))).item()) < 1e-7


def test_approx_kl_is_non_negative():
    ratio = torch.exp(torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 2)
    per_sample = (ratio - 1.0) - torch.log(ratio)
    assert (per_sample >= 0).all()
    assert approx_kl(ratio).item() >= 0.0


def test_approx_kl_estimates_kl_old_new():
    gen = torch.Generator().manual_seed(0)
    old = Categorical(logits=torch.tensor([0.0, 0.5, -1.0, 1.0]))
    new = Categorical(logits=torch.tensor([0.2, 0.1, -0.5, 1.2]))
    actions = torch.multinomial(old.probs, 200_000, replacement=True, generator=gen)  # seeded samples from old
    ratio = torch.exp(new.log_prob(actions) - old.log_prob(actions))
    exact = torch.distributions.kl_divergence(old, new).item()
    assert approx_kl(ratio).item() == pytest.approx(exact, rel=0.05)


# -- RunningMeanStd ---------------------------------------------------------------------------


def test_running_mean_std_matches_numpy():
    rng = np.random.default_rng(0)
    eps = 1e-5
    norm = RunningMeanStd((3,), eps=eps)
    batches = [rng.normal(loc=[1.0, -5.0, 100.0], scale=[0.1, 2.0, 30.0], size=(n, 3)) for n in (7, 50, 1, 200, 33)]
    for i, batch in enumerate(batches):
        norm.update(torch.tensor(batch))
        seen = np.concatenate(batches[: i + 1])
        # Exactly: the data pooled with the initial state, a pseudo-sample of weight eps, mean 0, var 1.
        count = eps + len(seen)
        mean = seen.sum(0) / count
        var = (eps * 1.0 + ((seen - seen.mean(0)) ** 2).sum(0) + seen.mean(0) ** 2 * eps * len(seen) / count) / count
        np.testing.assert_allclose(norm.mean.numpy(), mean, rtol=1e-9)
        np.testing.assert_allclose(norm.var.numpy(), var, rtol=1e-9)
        # Which is numpy's mean/var up to that tiny prior.
        np.testing.assert_allclose(norm.mean.numpy(), seen.mean(0), rtol=1e-4)
        np.testing.assert_allclose(norm.var.numpy(), seen.var(0), rtol=1e-3)
        assert norm.count.item() == pytest.approx(count)


def test_running_mean_std_float32_input():
    rng = np.random.default_rng(3)
    norm = RunningMeanStd((4,))
    seen = []
    for n in (16, 64, 5):
        x = rng.normal(2.0, 3.0, size=(n, 4)).astype(np.float32)
        seen.append(x.astype(np.float64))
        norm.update(torch.from_numpy(x))
    assert norm.mean.dtype == torch.float64
    allx = np.concatenate(seen)
    np.testing.assert_allclose(norm.mean.numpy(), allx.mean(0), rtol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), allx.var(0), rtol=1e-5)


def test_running_mean_std_of_images_matches_numpy():
    """Image-sized rows take the float32 chunked path, scaled from raw uint8 pixels: the
    statistics still match float64 numpy on the scaled data (batches larger than a chunk,
    and pixels whose mean is far from the running mean at first)."""
    rng = np.random.default_rng(4)
    shape, scale, subtract = (3, 40, 48), 255.0, 10.0
    norm = RunningMeanStd(shape)
    assert norm.mean.numel() > 4096
    base = rng.integers(0, 200, size=shape)
    seen = []
    for n in (70, 5, 33):
        x = np.clip(base + rng.integers(0, 56, size=(n, *shape)), 0, 255).astype(np.uint8)
        seen.append((x.astype(np.float64) - subtract) / scale)
        norm.update(torch.from_numpy(x), scale, subtract)
    allx = np.concatenate(seen)
    np.testing.assert_allclose(norm.mean.numpy(), allx.mean(0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(norm.var.numpy(), allx.var(0), rtol=1e-3, atol=1e-6)


def test_preprocessor_normalizes_scaled_observations():
    """The preprocessor folds obs_subtract_mean/obs_scale into the running statistics: its
    output is clip(((raw - subtract) / scale - mean) / std) for images and vectors alike, in
    gradient passes (channels-last images) and when acting."""
    from sf_hydra.models.normalizer import ObservationPreprocessor

    torch.manual_seed(0)
    pre = ObservationPreprocessor({"obs": (3, 40, 48), "m": (5,)}, 255.0, 10.0, normalize=True)
    raw = {"obs": torch.randint(0, 256, (64, 3, 40, 48), dtype=torch.uint8), "m": torch.randn(64, 5) * 30 + 1}
    pre.update(raw)
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            got = pre(raw)
        for key, x in raw.items():
            norm = pre.norms[key]
            want = (((x.double() - 10.0) / 255.0 - norm.mean) / torch.sqrt(norm.var + norm.eps)).clamp(-5.0, 5.0)
            assert got[key].dtype == torch.float32 and got[key].shape == x.shape
            torch.testing.assert_close(got[key].double(), want, rtol=0, atol=1e-5)
    assert (pre({"m": raw["m"] + 1e5})["m"] == 5.0).all()  # far outside the statistics: clipped
    plain = ObservationPreprocessor({"obs": (3, 40, 48)}, 255.0, 10.0, normalize=False)
    torch.testing.assert_close(plain({"obs": raw["obs"]})["obs"], (raw["obs"].float() - 10.0) / 255.0)


def test_running_mean_std_scalar_over_bt_batches():
    rng = np.random.default_rng(1)
    norm = RunningMeanStd(())
    seen = []
    for _ in range(4):
        x = rng.normal(3.0, 4.0, size=(8, 16))
        seen.append(x.ravel())
        norm.update(torch.tensor(x))
    allx = np.concatenate(seen)
    assert norm.mean.item() == pytest.approx(allx.mean(), rel=1e-4)
    assert norm.var.item() == pytest.approx(allx.var(), rel=1e-4)


def test_running_mean_std_normalize_and_denormalize():
    rng = np.random.default_rng(2)
    norm = RunningMeanStd((2,), clip=5.0)
    data = rng.normal([10.0, -3.0], [2.0, 0.5], size=(1000, 2))
    norm.update(torch.tensor(data))
    z = norm.normalize(torch.tensor(data, dtype=torch.float32))
    assert z.dtype == torch.float32
    np.testing.assert_allclose(z.mean(0).numpy(), 0.0, atol=1e-3)
    np.testing.assert_allclose(z.std(0, unbiased=False).numpy(), 1.0, atol=1e-3)
    x = torch.tensor([[11.0, -3.2]])
    torch.testing.assert_close(norm.denormalize(norm.normalize(x)), x, rtol=1e-5, atol=1e-5)
    far = norm.normalize(torch.tensor([[1e6, -1e6]]))
    torch.testing.assert_close(far, torch.tensor([[5.0, -5.0]]))


# -- RnnCore ----------------------------------------------------------------------------------


def unroll_reference(core: RnnCore, x, state, dones):
    """Each env's sequence is cut at its dones; every piece runs through the torch RNN on its
    own, the first from `state`, the others from zeros."""
    n, steps = dones.shape
    out = torch.zeros(n, steps, core.out_size)
    for b in range(n):
        h = state[b : b + 1]
        start = 0
        ends = [t + 1 for t in range(steps) if dones[b, t]] + [steps]
        for end in ends:
            if end > start:
                seq, new = core.rnn(x[b : b + 1, start:end].transpose(0, 1), core._unflatten(h))
                out[b, start:end] = seq[:, 0]
            h = torch.zeros_like(h)
            start = end
    return out


def unroll_by_steps(core: RnnCore, x, state, dones):
    outs = []
    for t in range(x.shape[1]):
        out, state = core.step(x[:, t], state)
        outs.append(out)
        state = state * (1.0 - dones[:, t : t + 1])
    return torch.stack(outs, 1)


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
@pytest.mark.parametrize("done_case", ["none", "last_step_only", "middle", "first_and_many"])
def test_rnn_unroll_equals_stepping(rnn_type, num_layers, done_case):
    torch.manual_seed(0)
    n, steps, feat, size = 4, 7, 5, 6
    core = RnnCore(feat, rnn_type, size, num_layers)
    assert core.state_size == size * num_layers * (2 if rnn_type == "lstm" else 1)
    x = torch.randn(n, steps, feat)
    state = torch.randn(n, core.state_size)
    dones = torch.zeros(n, steps)
    if done_case == "last_step_only":  # still the fused path: a done at the end affects no output
        dones[:, -1] = 1.0
    elif done_case == "middle":
        dones[1, 3] = 1.0
    elif done_case == "first_and_many":
        dones[0, 0] = 1.0
        dones[2, [1, 2, 5]] = 1.0
        dones[3] = 1.0
    with torch.no_grad():
        got = core.unroll(x, state, dones)
        stepped = unroll_by_steps(core, x, state, dones)
        reference = unroll_reference(core, x, state, dones)
    assert got.shape == (n, steps, size)
    torch.testing.assert_close(got, stepped, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got, reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_rnn_unroll_gradients_equal_stepping(rnn_type):
    """The learner back-propagates through unroll: its gradients (weights, inputs, first
    state) are those of stepping one step at a time with resets."""
    torch.manual_seed(2)
    core = RnnCore(5, rnn_type, 6, 1)
    x, state = torch.randn(3, 9, 5), torch.randn(3, core.state_size)
    dones = torch.zeros(3, 9)
    dones[0, [2, 6]] = dones[1, 4] = dones[2, 8] = 1.0
    grads = []
    for fn in (core.unroll, lambda *a: unroll_by_steps(core, *a)):
        core.zero_grad()
        xg, sg = x.clone().requires_grad_(), state.clone().requires_grad_()
        (fn(xg, sg, dones) * torch.linspace(-1, 1, 6)).sum().backward()
        grads.append([xg.grad, sg.grad] + [p.grad.clone() for p in core.parameters()])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_rnn_state_matters_and_round_trips(rnn_type):
    torch.manual_seed(1)
    core = RnnCore(3, rnn_type, 4, 2)
    state = torch.randn(5, core.state_size)
    torch.testing.assert_close(core._flatten(core._unflatten(state)), state)
    x, dones = torch.randn(5, 3, 3), torch.zeros(5, 3)
    with torch.no_grad():
        assert not torch.allclose(core.unroll(x, state, dones), core.unroll(x, torch.zeros_like(state), dones))


# -- action heads -----------------------------------------------------------------------------


def model_cfg(**kw):
    return OmegaConf.structured(ModelConfig(**kw))


def test_discrete_head():
    torch.manual_seed(0)
    head = make_action_head(8, gym.spaces.Discrete(5), model_cfg())
    x = torch.randn(64, 8)
    dist = head.distribution(x)
    actions = dist.sample()
    assert actions.shape == (64,) and actions.dtype == torch.int64
    assert ((actions >= 0) & (actions < 5)).all()
    ref = Categorical(logits=head.linear(x))
    log_probs = dist.log_prob(actions)
    assert log_probs.shape == (64,) and torch.isfinite(log_probs).all()
    torch.testing.assert_close(log_probs, ref.log_prob(actions))
    torch.testing.assert_close(dist.entropy(), ref.entropy())
    torch.testing.assert_close(dist.mode(), ref.probs.argmax(-1))


@pytest.mark.parametrize(
    "space", [gym.spaces.MultiDiscrete([3, 4, 2]), gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(6)])],
    ids=["multidiscrete", "tuple_of_discrete"],
)
def test_multi_discrete_head(space):
    torch.manual_seed(0)
    sizes = [3, 4, 2] if isinstance(space, gym.spaces.MultiDiscrete) else [2, 6]
    head = make_action_head(8, space, model_cfg())
    x = torch.randn(64, 8)
    dist = head.distribution(x)
    actions = dist.sample()
    assert actions.shape == (64, len(sizes))
    for i, n in enumerate(sizes):
        assert ((actions[:, i] >= 0) & (actions[:, i] < n)).all()
    refs = [Categorical(logits=lg) for lg in head.linear(x).split(sizes, dim=-1)]
    log_probs = dist.log_prob(actions)
    assert log_probs.shape == (64,) and torch.isfinite(log_probs).all()
    torch.testing.assert_close(log_probs, sum(r.log_prob(actions[:, i]) for i, r in enumerate(refs)))
    torch.testing.assert_close(dist.entropy(), sum(r.entropy() for r in refs))
    if isinstance(space, gym.spaces.MultiDiscrete):
        assert all(space.contains(a) for a in actions.numpy().astype(space.dtype))


@pytest.mark.parametrize("adaptive", [True, False])
@pytest.mark.parametrize("tanh_scale", [0.0, 2.0])
def test_box_head(adaptive, tanh_scale):
    torch.manual_seed(0)
    space = gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
    cfg = model_cfg(adaptive_stddev=adaptive, initial_stddev=0.5, continuous_tanh_scale=tanh_scale)
    head = make_action_head(8, space, cfg)
    x = torch.randn(64, 8) * 10
    dist = head.distribution(x)
    actions = dist.sample()
    assert actions.shape == (64, 3)
    log_probs = dist.log_prob(actions)
    assert log_probs.shape == (64,) and torch.isfinite(log_probs).all()
    mu = head.mean(x)
    if tanh_scale > 0:
        mu = torch.tanh(mu / tanh_scale) * tanh_scale
        assert dist.mode().abs().max() <= tanh_scale
    log_std = head.log_std(x) if adaptive else torch.full_like(mu, math.log(0.5))
    ref = Independent(Normal(mu, log_std.clamp(-4.0, 2.0).exp()), 1)
    torch.testing.assert_close(log_probs, ref.log_prob(actions))
    torch.testing.assert_close(dist.entropy(), ref.entropy())
    torch.testing.assert_close(dist.mode(), mu)
