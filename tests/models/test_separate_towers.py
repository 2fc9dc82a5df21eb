"""model.actor_critic_share_weights=false: the actor and the critic each have an encoder,
a core and a decoder; neither loss trains the other's tower."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.models import build_model, model_recipe
from tests.enjoy.test_enjoy import enjoy

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(3)
SEPARATE = ("model.actor_critic_share_weights=false", "model.use_rnn=true", "model.rnn_size=8",
            "model.decoder_mlp_layers=[6]")
CRITIC = ("critic_", "value_head")


def _model(tmp_cfg, *overrides):
    torch.manual_seed(0)
    return build_model(model_recipe(tmp_cfg(*overrides)), OBS, ACTIONS)


def _losses(model):
    """(policy loss, value loss) of a [B=3, T=5] chunk that crosses an episode end."""
    obs = {"obs": torch.randn(3, 5, 4)}
    actions = torch.randint(0, 3, (3, 5))
    dones = torch.zeros(3, 5)
    dones[1, 2] = 1.0
    rnn = torch.randn(3, model.rnn_state_size)
    log_probs, entropy, values = model.evaluate(obs, actions, rnn, dones)
    return -(log_probs + 0.01 * entropy).sum(), values.square().sum()


def _grads(model, loss):
    model.zero_grad()
    loss.backward(retain_graph=True)
    return {n: p.grad is not None and bool(p.grad.abs().sum() > 0) for n, p in model.named_parameters()}


def test_each_loss_trains_only_its_own_tower(tmp_cfg):
    model = _model(tmp_cfg, *SEPARATE)
    policy_loss, value_loss = _losses(model)
    from_value, from_policy = _grads(model, value_loss), _grads(model, policy_loss)
    critic = {n for n in from_value if n.startswith(CRITIC)}
    actor = set(from_value) - critic
    assert {n.split(".")[0] for n in critic} == {"critic_encoder", "critic_core", "critic_decoder", "value_head"}
    assert {n.split(".")[0] for n in actor} == {"encoder", "core", "decoder", "action_head"}
    assert not any(from_value[n] for n in actor) and all(from_value[n] for n in critic)
    assert not any(from_policy[n] for n in critic) and all(from_policy[n] for n in actor)


def test_shared_tower_gets_both_gradients(tmp_cfg):
    """The contrast: with the default one tower, the value loss does reach the encoder."""
    model = _model(tmp_cfg, *SEPARATE[1:])
    assert model.critic_encoder is None
    _, value_loss = _losses(model)
    assert _grads(model, value_loss)["encoder.encoders.obs.net.1.0.weight"]


def test_rnn_state_holds_both_cores(tmp_cfg):
    shared, separate = _model(tmp_cfg, *SEPARATE[1:]), _model(tmp_cfg, *SEPARATE)
    assert separate.rnn_state_size == 2 * shared.rnn_state_size == 16
    obs = {"obs": torch.randn(2, 4)}
    state = torch.randn(2, 16)
    out = separate.act(obs, state, deterministic=True)
    assert out.rnn_states.shape == (2, 16)
    # Changing the critic's half changes the value only; the actor's half, the policy only.
    critic_changed = separate.act(obs, torch.cat([state[:, :8], torch.randn(2, 8)], 1), deterministic=True)
    assert torch.equal(critic_changed.log_probs, out.log_probs) and not torch.equal(critic_changed.values, out.values)
    assert torch.equal(critic_changed.rnn_states[:, :8], out.rnn_states[:, :8])
    actor_changed = separate.act(obs, torch.cat([torch.randn(2, 8), state[:, 8:]], 1), deterministic=True)
    assert torch.equal(actor_changed.values, out.values) and not torch.equal(actor_changed.log_probs, out.log_probs)


def test_unrolled_evaluate_matches_stepwise_act(tmp_cfg):
    """The learner's unroll and the workers' steps compute the same function, state split included."""
    model = _model(tmp_cfg, *SEPARATE)
    obs = torch.randn(2, 6, 4)
    dones = torch.zeros(2, 6)
    dones[0, 2] = 1.0  # the state is reset after this step
    state = first = torch.randn(2, model.rnn_state_size)
    actions, log_probs, values = [], [], []
    for t in range(6):
        out = model.act({"obs": obs[:, t]}, state)
        actions.append(out.actions)
        log_probs.append(out.log_probs)
        values.append(out.values)
        state = out.rnn_states * (1.0 - dones[:, t:t + 1])
    lp, _, v = model.evaluate({"obs": obs}, torch.stack(actions, 1), first, dones)
    assert torch.allclose(lp, torch.stack(log_probs, 1), atol=1e-5)
    assert torch.allclose(v, torch.stack(values, 1), atol=1e-5)


@pytest.mark.slow
def test_cartpole_trains_with_separate_towers_and_replays_in_enjoy(tmp_path):
    from sf_hydra.app.train import train
    from tests.conftest import make_cfg

    summary = train(make_cfg(tmp_path, *SEPARATE[:3], "model.rnn_size=16", "train_for_env_steps=3000"))
    assert summary["env_steps"] >= 3000 and summary["policy_version"] > 0
    ckpt = torch.load(tmp_path / "test" / "checkpoints" / "last.ckpt", weights_only=False)
    assert any(k.startswith("policies.0.critic_core.") for k in ckpt["state_dict"])
    result = enjoy(tmp_path, "experiment=test", "episodes=1", "max_episode_steps=30")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "test" / "enjoy" / "eval.json").exists()
