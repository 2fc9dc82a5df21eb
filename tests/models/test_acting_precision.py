"""hardware.acting_precision: the copies that act (rollout workers, inference servers) keep their towers'
weights in bfloat16 (ActorCritic.act_in_bf16), rounded once per weight copy, while the observation normalizer,
the heads and everything `act` returns stay float32; auto follows the learner's forward precision."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.models.actor_critic import FusedPolicies, acting_copy, build_model
from sf_hydra.models.recipe import model_recipe
from sf_hydra.plan import native_bf16, plan_run, resolved_acting_bf16
from sf_hydra.sampler.env_info import describe_env
from sf_hydra.sampler.policy_store import PolicyStore

IMAGE = gym.spaces.Dict({"obs": gym.spaces.Box(0, 255, (3, 36, 64), np.uint8)})
ACTIONS = gym.spaces.Discrete(3)
SMALL = ("model.rnn_size=32", "model.encoder_conv_mlp_layers=[64]")


def _doom_model(tmp_cfg, *overrides):
    cfg = tmp_cfg("env=doom/basic", *SMALL, *overrides)
    torch.manual_seed(0)
    return build_model(model_recipe(cfg), IMAGE, ACTIONS)


def _batch(rows: int = 6):
    g = torch.Generator().manual_seed(1)
    obs = {"obs": torch.randint(0, 256, (rows, *IMAGE["obs"].shape), generator=g, dtype=torch.uint8)}
    return obs, 0.5 * torch.randn(rows, 32, generator=g)


def _acting(model):
    """`model` as a worker acts with it: an acting copy with bf16 towers, under bf16 autocast."""
    copy = acting_copy(_clone(model), bf16=True)
    return copy, torch.autocast("cpu", dtype=torch.bfloat16)


def _clone(model):
    import copy

    return copy.deepcopy(model)


def test_the_towers_are_bf16_and_the_normalizer_and_heads_as_they_were(tmp_cfg):
    learner = _doom_model(tmp_cfg)
    model, _ = _acting(learner)
    towers = [p for t in model.towers() for p in t.parameters()]
    assert towers and all(p.dtype == torch.bfloat16 for p in towers)
    for name in ("action_head", "value_head", "preprocess"):
        kept = {k: t.dtype for k, t in getattr(learner, name).state_dict().items()}
        assert {k: t.dtype for k, t in getattr(model, name).state_dict().items()} == kept, name
        assert torch.bfloat16 not in kept.values()


def test_act_returns_float32_from_float32_heads_on_the_bf16_towers_features(tmp_cfg):
    model, autocast = _acting(_doom_model(tmp_cfg))
    obs, rnn = _batch()
    with autocast:
        out = model.act(obs, rnn)
        from sf_hydra.models.actor_critic import _tower_step

        x, state = _tower_step(model.encoder, model.core, model.decoder, model._inputs(obs), rnn)
    assert out.log_probs.dtype == out.values.dtype == out.rnn_states.dtype == torch.float32
    # the definition: float32 heads on the towers' features made float32 (bf16 heads would round the logits)
    x = x.float()
    logp = torch.log_softmax(model.action_head.linear(x), dim=-1)
    assert torch.equal(out.log_probs, logp.gather(1, out.actions.reshape(-1, 1)).squeeze(1))
    assert torch.equal(out.values, model.value_head(x).squeeze(-1))
    assert torch.equal(out.rnn_states, state.float())


def test_acting_in_bf16_is_the_float32_function_to_bf16s_precision(tmp_cfg):
    model = _doom_model(tmp_cfg).eval()
    acting, autocast = _acting(model)
    obs, rnn = _batch()
    exact = model.forward_step(obs, rnn)
    with autocast:
        low = acting.forward_step(obs, rnn)
    assert not torch.equal(low[1], exact[1])  # it does compute in bf16
    torch.testing.assert_close(low[1], exact[1], atol=0.05, rtol=0.05)
    torch.testing.assert_close(low[2], exact[2], atol=0.05, rtol=0.05)
    torch.testing.assert_close(low[0].params(), exact[0].params(), atol=0.05, rtol=0.05)


def test_weights_copied_into_an_acting_copy_are_the_learners_rounded_to_bf16(tmp_cfg):
    learner = _doom_model(tmp_cfg)
    store = PolicyStore(learner)
    acting, _ = _acting(_doom_model(tmp_cfg, "seed=5"))
    with torch.no_grad():
        for p in learner.parameters():
            p.add_(torch.randn_like(p))
    store.publish(learner, version=3)
    assert store.load_into(acting) == 3
    theirs, mine = learner.state_dict(), acting.state_dict()
    for name, t in theirs.items():
        assert torch.equal(mine[name], t.to(mine[name].dtype)), name
    assert any(mine[n].dtype == torch.bfloat16 for n in mine) and any(mine[n].dtype == torch.float32 for n in mine)


def test_a_bf16_recurrent_core_keeps_the_state_in_its_own_dtype():
    from sf_hydra.models.cores import RnnCore

    for kind in ("gru", "lstm"):
        torch.manual_seed(0)
        core = RnnCore(16, kind, 8, 1)
        exact = RnnCore(16, kind, 8, 1)
        exact.load_state_dict(core.state_dict())
        core.to(torch.bfloat16)
        x, state = torch.randn(4, 16), torch.randn(4, core.state_size)
        out, new = core.step(x, state)
        assert new.dtype == torch.float32 and out.dtype == torch.bfloat16
        want_out, want_new = exact.step(x, state)
        torch.testing.assert_close(new, want_new, atol=0.03, rtol=0.03)


def test_fused_policies_leave_bf16_towers_alone(tmp_cfg):
    cfg = tmp_cfg("env=gym/cartpole", "model.use_rnn=false", "algo.normalize_input=false")
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    models = [build_model(model_recipe(cfg), space, gym.spaces.Discrete(2)) for _ in range(2)]
    assert FusedPolicies.supports(models)
    assert not FusedPolicies.supports([acting_copy(m, bf16=True) for m in models])


def test_auto_follows_the_learners_forward_precision():
    assert resolved_acting_bf16("auto", True, "32-true")
    assert not resolved_acting_bf16("auto", False, "32-true")
    assert resolved_acting_bf16("auto", False, "bf16-mixed")
    assert not resolved_acting_bf16("fp32", True, "bf16-mixed") and resolved_acting_bf16("bf16", False, "32-true")


@pytest.mark.parametrize("env, images", [("doom/basic", True), ("gym/cartpole", False)])
def test_a_runs_plan_acts_in_bf16_where_its_learner_computes_in_bf16(tmp_cfg, env, images):
    cfg = tmp_cfg(f"env={env}")
    plan = plan_run(cfg, describe_env(cfg.env, seed=0))
    assert plan.sampler.workers.acting.bf16 == plan.learner.bf16 == (images and native_bf16("cpu"))
    forced = tmp_cfg(f"env={env}", "hardware.acting_precision=bf16", "hardware.learner_precision=fp32")
    plan = plan_run(forced, describe_env(forced.env, seed=0))
    assert plan.sampler.workers.acting.bf16 and not plan.learner.bf16
