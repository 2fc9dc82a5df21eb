"""hardware.learner_precision (bfloat16 autocast of the learner's forward passes, conv weights
channels-last) and hardware.learner_compile (torch.compile of `evaluate`): the update they give
is the float32 one, to bf16's precision or exactly."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.plan import native_bf16, resolved_learner_bf16
from tests.helpers.plans import learner_for, with_trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

IMAGE = gym.spaces.Box(0, 255, (3, 36, 64), np.uint8)
VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ROWS, T = 4, 8


def test_auto_is_bf16_for_images_on_a_cpu_with_native_bf16_only():
    assert resolved_learner_bf16("auto", "cpu", IMAGE) == native_bf16("cpu")
    assert not resolved_learner_bf16("auto", "cpu", VECTOR)  # measured: no gain for an MLP
    assert not resolved_learner_bf16("auto", "cuda", IMAGE)  # not measured on a GPU yet
    assert resolved_learner_bf16("bf16", "cpu", VECTOR) and not resolved_learner_bf16("fp32", "cpu", IMAGE)


def _learner(tmp_cfg, *overrides):
    cfg = tmp_cfg("env=doom/basic", f"algo.rollout={T}", "model.rnn_size=32", "model.encoder_conv_mlp_layers=[64]",
                  *overrides)
    torch.manual_seed(0)
    return with_trainer(learner_for(cfg, gym.spaces.Dict({"obs": IMAGE}), gym.spaces.Discrete(3)))


def _minibatch(state_size: int) -> dict:
    g = torch.Generator().manual_seed(1)
    return {
        "obs.obs": torch.randint(0, 256, (ROWS, T, *IMAGE.shape), generator=g, dtype=torch.uint8),
        "actions": torch.randint(0, 3, (ROWS, T), generator=g),
        "log_probs": torch.full((ROWS, T), -1.1) + 0.1 * torch.randn(ROWS, T, generator=g),
        "dones": (torch.rand(ROWS, T, generator=g) < 0.2).float(),
        "advantages": torch.randn(ROWS, T, generator=g), "targets": torch.randn(ROWS, T, generator=g),
        "old_values": torch.randn(ROWS, T, generator=g), "rnn_states": torch.randn(ROWS, state_size, generator=g),
    }


def _update(learner):
    """The minibatch's statistics, gradients and the dtype the conv encoder computed in."""
    dtypes = []
    conv = next(m for m in learner.model.modules() if isinstance(m, torch.nn.Conv2d))
    handle = conv.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    try:
        stats = learner._accumulate_gradients(learner.model, _minibatch(learner.model.rnn_state_size),
                                              learner.hyperparams[0])
    finally:
        handle.remove()
    grads = {n: p.grad.clone() for n, p in learner.model.named_parameters() if p.grad is not None}
    return stats, grads, set(dtypes)


def test_bf16_forward_gives_the_fp32_update_to_bf16_precision(tmp_cfg):
    fp32 = _learner(tmp_cfg, "hardware.learner_precision=fp32")
    bf16 = _learner(tmp_cfg, "hardware.learner_precision=bf16")
    conv = next(m for m in bf16.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    stats_32, grads_32, dtypes_32 = _update(fp32)
    stats_16, grads_16, dtypes_16 = _update(bf16)
    assert dtypes_32 == {torch.float32} and dtypes_16 == {torch.bfloat16}
    for key, value in stats_32.items():
        assert stats_16[key].dtype == torch.float32, key  # the losses in float32
        assert float(stats_16[key]) == pytest.approx(float(value), rel=0.05, abs=0.02), key
    for name, g in grads_32.items():  # bf16 keeps ~3 significant digits: the direction, not the digits
        cos = torch.nn.functional.cosine_similarity(g.flatten(), grads_16[name].flatten(), dim=0)
        assert cos > 0.95, (name, float(cos))


@pytest.mark.slow
def test_compiled_forward_gives_the_same_update(tmp_cfg):
    plain = _learner(tmp_cfg, "hardware.learner_precision=fp32")
    compiled = _learner(tmp_cfg, "hardware.learner_precision=fp32", "hardware.learner_compile=true")
    assert hasattr(compiled.model.evaluate, "_torchdynamo_orig_callable") or "compile" in repr(compiled.model.evaluate)
    stats_a, grads_a, _ = _update(plain)
    stats_b, grads_b, _ = _update(compiled)
    for key in stats_a:
        assert float(stats_b[key]) == pytest.approx(float(stats_a[key]), rel=1e-4, abs=1e-5), key
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], rtol=1e-3, atol=1e-5, msg=name)
