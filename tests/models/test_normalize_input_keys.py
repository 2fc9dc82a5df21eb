"""algo.normalize_input_keys: which Dict observation keys get running mean/std
normalization (None: all); the others are only scaled."""

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.config import ConfigError
from sf_hydra.models import build_model, model_recipe
from sf_hydra.models.actor_critic import check_model_for_env
from sf_hydra.models.normalizer import ObservationPreprocessor
from tests.helpers.space_envs import DictObsEnv

SHAPES = {"image": (3, 4, 4), "vec": (2,)}


def _batch(n=4000):
    torch.manual_seed(0)
    return {"image": torch.randint(0, 256, (n, 3, 4, 4), dtype=torch.uint8),
            "vec": torch.randn(n, 2) * torch.tensor([2.0, 0.5]) + torch.tensor([5.0, -1.0])}


def test_listed_keys_are_normalized_and_the_others_pass_through():
    pre = ObservationPreprocessor(SHAPES, obs_scale=2.0, obs_subtract_mean=0.0, normalize=True, keys=["vec"])
    assert set(pre.norms) == {"vec"}
    batch = _batch()
    pre.update(batch)
    out = pre(batch)
    # Unlisted: scaled only, exactly (x - 0) / 2.
    assert torch.equal(out["image"], batch["image"].float() / 2.0)
    # Listed: standardized by the running statistics of the scaled values.
    mean, std = out["vec"].mean(0), out["vec"].std(0)
    assert torch.allclose(mean, torch.zeros(2), atol=0.02) and torch.allclose(std, torch.ones(2), atol=0.02)
    expected = (batch["vec"] / 2.0 - (batch["vec"] / 2.0).mean(0)) / (batch["vec"] / 2.0).std(0)
    assert torch.allclose(out["vec"], expected.clamp(-5, 5), atol=0.05)


def test_none_normalizes_every_key_and_off_normalizes_none():
    assert set(ObservationPreprocessor(SHAPES, 1.0, 0.0, True, None).norms) == {"image", "vec"}
    assert set(ObservationPreprocessor(SHAPES, 1.0, 0.0, False, ["vec"]).norms) == set()


def test_model_reads_the_config_key(tmp_cfg):
    cfg = tmp_cfg("algo.normalize_input=true", "algo.normalize_input_keys=[vec]", "model.encoder_conv_mlp_layers=[8]")
    model = build_model(model_recipe(cfg), DictObsEnv.observation_space, DictObsEnv.action_space)
    assert set(model.preprocess.norms) == {"vec"}


def test_unknown_key_is_refused_naming_key_value_and_env_keys(tmp_cfg):
    cfg = tmp_cfg("algo.normalize_input_keys=[vec,pixels]")
    with pytest.raises(ConfigError) as err:
        check_model_for_env(cfg, DictObsEnv.observation_space, DictObsEnv.action_space)
    msg = str(err.value)
    assert msg.startswith("algo.normalize_input_keys=['vec', 'pixels'] is not allowed")
    assert "image, vec" in msg and "unknown: pixels" in msg


def test_train_refuses_an_unknown_key_before_workers_start(tmp_cfg):
    cfg = tmp_cfg("env=gym/any", "env.id=tests.helpers.space_envs:DictObs-v0", "algo.normalize_input_keys=[obs]")
    with pytest.raises(ConfigError, match=r"^algo.normalize_input_keys=\['obs'\].*image, vec"):
        train(cfg)
