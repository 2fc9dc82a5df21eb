"""Under CPU bfloat16 autocast (the learner's forward with hardware.learner_precision=bf16) the
preprocessor hands image batches to the conv encoder in bfloat16, scaled a few rows at a time: the
values must be exactly what autocast would have given the first conv from the float32 path."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sf_hydra.models.normalizer import _CHUNK_ROWS, ObservationPreprocessor


def _reference(raw: torch.Tensor, pre: ObservationPreprocessor, key: str) -> torch.Tensor:
    """From the definition: clip(((raw - subtract) / scale - mean) / std) in float64 for a normalized
    key, (raw - subtract) / scale otherwise."""
    x = (raw.double() - pre.obs_subtract_mean) / pre.obs_scale
    if key in pre.norms:
        norm = pre.norms[key]
        x = ((x - norm.mean) / torch.sqrt(norm.var + norm.eps)).clamp(-norm.clip, norm.clip)
    return x


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("rows", [1, _CHUNK_ROWS, 2 * _CHUNK_ROWS + 3])
def test_bf16_autocast_images_equal_the_float32_path_cast(normalize, rows):
    torch.manual_seed(rows)
    pre = ObservationPreprocessor({"obs": (3, 24, 32), "m": (5,)}, 255.0, 10.0, normalize=normalize)
    seen = {"obs": torch.randint(0, 256, (64, 3, 24, 32), dtype=torch.uint8), "m": torch.randn(64, 5) * 30}
    pre.update(seen)
    raw = {k: v[:rows] for k, v in seen.items()}
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            plain = pre(raw)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                low = pre(raw)
        image = low["obs"]
        assert image.dtype == torch.bfloat16 and image.shape == raw["obs"].shape
        # the layout the float32 path gives (channels-last in gradient passes), so the conv runs the same way
        assert image.is_contiguous(memory_format=torch.channels_last if grad else torch.contiguous_format)
        assert torch.equal(image, plain["obs"].to(torch.bfloat16))  # bit for bit
        torch.testing.assert_close(image.double(), _reference(raw["obs"], pre, "obs"), rtol=2**-8, atol=1e-5)
        assert low["m"].dtype == torch.float32 and torch.equal(low["m"], plain["m"])  # vectors: unchanged


def test_bf16_conv_forward_and_gradients_are_unchanged():
    """A conv on the preprocessed batch under autocast: the same output and weight gradient as when
    autocast cast the float32 batch itself (the path before the chunked preprocessing)."""
    torch.manual_seed(0)
    pre = ObservationPreprocessor({"obs": (3, 24, 32)}, 255.0, 0.0, normalize=True)
    raw = torch.randint(0, 256, (40, 3, 24, 32), dtype=torch.uint8)
    pre.update({"obs": raw})
    conv = nn.Conv2d(3, 8, 4, 2).to(memory_format=torch.channels_last)
    outs, grads = [], []
    for chunked in (False, True):
        conv.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            x = pre({"obs": raw})["obs"] if chunked else None
        if not chunked:
            x = pre({"obs": raw})["obs"]  # float32, cast by autocast at the conv
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = conv(x)
        y.float().square().sum().backward()
        outs.append(y.detach())
        grads.append(conv.weight.grad.clone())
    assert outs[0].dtype == outs[1].dtype == torch.bfloat16
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(grads[0], grads[1])
