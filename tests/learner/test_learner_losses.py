"""The new losses wired into the learner: V-trace's targets from the current model over the
recorded chunks, the KL penalty against the recorded behaviour distribution (recorded only
when it is on), the symmetric-KL exploration loss, and the refusals that need the env's spaces."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.config import ConfigError, validate
from sf_hydra.core.spaces import discrete_sizes
from sf_hydra.core.trajectory import ACTION_DIST_PARAMS
from sf_hydra.learner.advantages import gae
from sf_hydra.learner.ppo_learner import PPOLearner
from sf_hydra.models.action_heads import CategoricalHead
from sf_hydra.models.kl import categorical_kl, symmetric_kl_with_uniform
from tests.helpers.plans import learner_for
from tests.learner.test_vtrace_loss import vtrace_reference

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ROWS, T = 6, 8
HERE = __name__


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _learner(tmp_cfg, *overrides, actions=gym.spaces.Discrete(3)) -> PPOLearner:
    cfg = tmp_cfg("env=gym/cartpole", "algo.normalize_returns=false", "algo.normalize_input=false",
                  f"algo.rollout={T}", *overrides)
    torch.manual_seed(0)
    return learner_for(cfg, OBS, actions)


def _rollout(model, seed: int = 1) -> dict:
    """A batch as the rollout workers record it: the model acting step by step (its RNN state
    zeroed after a done), plus the bootstrap value of one more observation."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(ROWS, T + 1, 4, generator=g)
    dones = (torch.rand(ROWS, T, generator=g) < 0.15).float()
    state = torch.zeros(ROWS, model.rnn_state_size) if model.rnn_state_size else None
    rec = {"actions": [], "log_probs": [], "values": [], "rnn_states": [], ACTION_DIST_PARAMS: []}
    for t in range(T + 1):
        out = model.act({"obs": obs[:, t]}, state)
        rec["values"].append(out.values)
        if t == T:
            break
        rec["actions"].append(out.actions)
        rec["log_probs"].append(out.log_probs)
        rec["rnn_states"].append(state if state is not None else torch.zeros(ROWS, 0))
        rec[ACTION_DIST_PARAMS].append((out.extras or {}).get(ACTION_DIST_PARAMS, torch.zeros(ROWS, 0)))
        if state is not None:
            state = out.rnn_states * (1.0 - dones[:, t : t + 1])
    batch = {k: torch.stack(v, dim=1) for k, v in rec.items()}
    batch.update({"obs.obs": obs[:, :T], "dones": dones, "rewards": torch.randn(ROWS, T, generator=g),
                  "time_outs": torch.zeros(ROWS, T), "policy_versions": torch.zeros(ROWS, T, dtype=torch.int64)})
    if not model.rnn_state_size:
        del batch["rnn_states"]
    return batch


def _perturb(model, scale=0.3, seed=5):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))


# -- V-trace ------------------------------------------------------------------------------------


def test_vtrace_reevaluates_each_recurrence_chunk_from_its_recorded_state(tmp_cfg):
    """An RNN trained in chunks of 4 of an 8-step rollout: before any update, the learner's
    no-grad pass reproduces the behaviour's log-probs and values exactly, so V-trace is on-policy
    (every rho = 1) and its targets are GAE's with lambda = 1."""
    learner = _learner(tmp_cfg, "model.use_rnn=true", "model.rnn_size=8", "algo.recurrence=4", "algo.with_vtrace=true")
    model = learner.model
    batch = _rollout(model)
    log_probs, values = learner._current_outputs(model, batch)
    torch.testing.assert_close(log_probs, batch["log_probs"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(values, batch["values"][:, :-1], atol=1e-5, rtol=1e-5)
    adv, targets, old_values = learner._advantages_and_targets(model, batch, None, 0.99)
    _, gae_targets = gae(batch["rewards"], batch["values"], batch["dones"], 0.99, 1.0)
    torch.testing.assert_close(targets, gae_targets, atol=1e-4, rtol=1e-4)
    next_targets = torch.cat([targets[:, 1:], batch["values"][:, -1:]], dim=1) * (1.0 - batch["dones"])
    torch.testing.assert_close(adv, batch["rewards"] + 0.99 * next_targets - batch["values"][:, :-1],
                               atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("rho,c", [(1.0, 1.0), (1.5, 0.5)])
def test_vtrace_corrects_towards_the_current_policy(tmp_cfg, rho, c):
    """After the policy moved on, the targets are V-trace's with log rho = log pi - log mu from
    the current model, its current values, and the behaviour's bootstrap value."""
    learner = _learner(tmp_cfg, "model.use_rnn=false", "algo.with_vtrace=true", f"algo.vtrace_rho={rho}",
                       f"algo.vtrace_c={c}")
    model = learner.model
    batch = _rollout(model)
    _perturb(model)
    with torch.no_grad():
        current_lp, _, current_v = model.evaluate({"obs": batch["obs.obs"]}, batch["actions"], None, batch["dones"])
    log_rhos = (current_lp - batch["log_probs"]).numpy()
    assert np.abs(log_rhos).max() > 0.05  # really off-policy
    values = torch.cat([current_v, batch["values"][:, -1:]], dim=1).numpy()
    ref_targets, ref_adv = vtrace_reference(log_rhos, batch["rewards"].numpy(), values, batch["dones"].numpy(),
                                            0.97, rho, c)
    adv, targets, old_values = learner._advantages_and_targets(model, batch, None, 0.97)
    np.testing.assert_allclose(targets.numpy(), ref_targets, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(adv.numpy(), ref_adv, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(old_values, current_v)  # value clipping is around the current values


def test_vtrace_ignores_another_policys_ratios(tmp_cfg):
    """Transitions of another policy (valid = 0) may carry log-probs this policy finds absurd:
    their ratio counts as 1 and nothing overflows."""
    learner = _learner(tmp_cfg, "model.use_rnn=false", "algo.with_vtrace=true")
    batch = _rollout(learner.model)
    valid = torch.ones(ROWS, T)
    valid[0] = 0.0
    batch["log_probs"][0] = -1e30
    adv, targets, _ = learner._advantages_and_targets(learner.model, batch, valid, 0.99)
    assert torch.isfinite(adv).all() and torch.isfinite(targets).all()


# -- recording the behaviour distribution ----------------------------------------------------------


def test_default_records_no_distribution_parameters(tmp_cfg):
    learner = _learner(tmp_cfg)
    assert ACTION_DIST_PARAMS not in learner.spec
    assert learner.model.act({"obs": torch.zeros(2, 4)}, None).extras is None


@pytest.mark.parametrize("actions,size", [(gym.spaces.Discrete(3), 3), (gym.spaces.MultiDiscrete([2, 5]), 7),
                                          (gym.spaces.Box(-1.0, 1.0, (2,), np.float32), 4)],
                         ids=["discrete", "multi_discrete", "box"])
def test_kl_penalty_records_the_behaviour_distribution(tmp_cfg, actions, size):
    learner = _learner(tmp_cfg, "algo.kl_loss_coeff=0.2", actions=actions)
    assert learner.spec[ACTION_DIST_PARAMS].shape == (size,)
    out = learner.model.act({"obs": torch.randn(5, 4)}, None)
    assert out.extras[ACTION_DIST_PARAMS].shape == (5, size)


def _minibatch(batch: dict) -> dict:
    g = torch.Generator().manual_seed(9)
    mb = {k: v for k, v in batch.items() if k not in ("values", "rewards", "time_outs")}
    mb.update(advantages=torch.randn(ROWS, T, generator=g), targets=torch.randn(ROWS, T, generator=g),
              old_values=batch["values"][:, :-1])
    return mb


def _logits(model, obs):
    """The feed-forward model's action logits for [B, T, 4] observations, computed by hand."""
    flat = model.action_head.linear(model.decoder(model._features({"obs": obs.reshape(-1, 4)})))
    return flat.reshape(*obs.shape[:2], -1)


def test_kl_penalty_is_the_exact_kl_from_the_recorded_distribution(tmp_cfg):
    with_kl = _learner(tmp_cfg, "model.use_rnn=false", "algo.kl_loss_coeff=0.5")
    without = _learner(tmp_cfg, "model.use_rnn=false")
    model = with_kl.model
    mb = _minibatch(_rollout(model))
    hyper = with_kl.hyperparams[0]
    assert with_kl._minibatch_losses(model, mb, hyper)["loss/kl"].item() == pytest.approx(0.0, abs=1e-6)
    _perturb(model)
    without.model.load_state_dict(model.state_dict())
    losses = with_kl._minibatch_losses(model, mb, hyper)
    with torch.no_grad():
        new_logits = _logits(model, mb["obs.obs"])
    expected = categorical_kl(new_logits, mb[ACTION_DIST_PARAMS]).mean()  # KL(current || behaviour), SF's
    assert losses["loss/kl"].item() == pytest.approx(expected.item(), rel=1e-5) and expected.item() > 1e-3
    plain = without._minibatch_losses(without.model, mb, hyper)
    assert "loss/kl" not in plain
    assert losses["loss/total"].item() == pytest.approx(plain["loss/total"].item() + 0.5 * expected.item(), rel=1e-5)
    # its gradient pulls the policy back towards the behaviour's
    model.zero_grad()
    losses = with_kl._minibatch_losses(model, mb, hyper)
    (losses["loss/total"] - plain["loss/total"].detach()).backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.sub_(0.02 * p.grad)
    assert with_kl._minibatch_losses(model, mb, hyper)["loss/kl"].item() < expected.item()


def test_symmetric_kl_exploration_loss_replaces_the_entropy(tmp_cfg):
    sym = _learner(tmp_cfg, "model.use_rnn=false", "algo.exploration_loss=symmetric_kl",
                   "algo.exploration_loss_coeff=0.1")
    ent = _learner(tmp_cfg, "model.use_rnn=false", "algo.exploration_loss_coeff=0.1")
    _perturb(sym.model, scale=1.0)
    ent.model.load_state_dict(sym.model.state_dict())
    mb = _minibatch(_rollout(sym.model))
    hyper = sym.hyperparams[0]
    a, b = sym._minibatch_losses(sym.model, mb, hyper), ent._minibatch_losses(ent.model, mb, hyper)
    with torch.no_grad():
        logits = _logits(sym.model, mb["obs.obs"])
    expected = symmetric_kl_with_uniform(logits).mean().item()
    assert a["loss/exploration"].item() == pytest.approx(expected, rel=1e-5) and expected > 1e-3
    assert b["loss/exploration"].item() == pytest.approx(-b["loss/entropy"].item(), rel=1e-6)
    assert a["loss/entropy"].item() == pytest.approx(b["loss/entropy"].item(), rel=1e-6)
    assert a["loss/total"].item() == pytest.approx(
        b["loss/total"].item() + 0.1 * (expected + b["loss/entropy"].item()), rel=1e-5)


# -- refusals ----------------------------------------------------------------------------------


def test_symmetric_kl_with_continuous_actions_is_refused(tmp_cfg):
    """Refused by the env-dependent rules (learner/loss_rules.py), before any process starts."""
    from sf_hydra.app.train import train

    cfg = tmp_cfg("env=gym/any", "env.id=Pendulum-v1", "algo.exploration_loss=symmetric_kl")
    with pytest.raises(ConfigError, match=r"^algo.exploration_loss='symmetric_kl' is not allowed: entropy"):
        train(cfg)


class HeadWithoutParams(CategoricalHead):
    """A user's head whose distributions cannot be rebuilt from recorded parameters."""

    def __init__(self, in_size, space, model_cfg):
        super().__init__(in_size, discrete_sizes(space), single=True)
        del self.params_size


def test_kl_penalty_with_a_head_that_records_nothing_is_refused(tmp_cfg):
    with pytest.raises(ConfigError, match=r"^algo.kl_loss_coeff=0.1 is not allowed: 0 with the action head"):
        _learner(tmp_cfg, "algo.kl_loss_coeff=0.1", f"model.action_head._target_={HERE}.HeadWithoutParams")


@pytest.mark.parametrize("override,key", [
    (("algo.kl_loss_coeff=-0.1",), "algo.kl_loss_coeff"),
    (("algo.vtrace_rho=0",), "algo.vtrace_rho"),
    (("algo.vtrace_c=-1",), "algo.vtrace_c"),
    (("algo.with_vtrace=true", "algo.vtrace_rho=0.5", "algo.vtrace_c=0.9"), "algo.vtrace_c"),
])
def test_bad_loss_keys_are_refused_naming_the_key(tmp_cfg, override, key):
    with pytest.raises(ConfigError, match=rf"^{key}="):
        validate(tmp_cfg(*override))


def test_vtrace_with_epochs_and_recurrent_chunks_is_accepted(tmp_cfg):
    validate(tmp_cfg("algo.with_vtrace=true", "algo.num_epochs=4", "model.use_rnn=true", "algo.recurrence=8",
                     "algo.vtrace_rho=2.0", "algo.vtrace_c=1.0"))


def test_unknown_exploration_loss_is_refused_when_composing(tmp_cfg):
    with pytest.raises(Exception, match="kl_to_uniform"):
        tmp_cfg("algo.exploration_loss=kl_to_uniform")
