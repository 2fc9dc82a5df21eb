"""A resume whose newest checkpoint does not fit the model (a tensor of another shape: a checkpoint of another
network copied in, or a damaged one) says so in one line and resumes from the previous checkpoint, as for an
unreadable one (issue 52, item 3)."""

import logging

import pytest
import torch

from sf_hydra.app.train import train
from tests.conftest import make_cfg

SMALL = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.batch_size=32")


def _trained(tmp_path, steps: int):
    return train(make_cfg(tmp_path, *SMALL, f"train_for_env_steps={steps}"))


@pytest.mark.slow
def test_a_checkpoint_of_another_shape_falls_back_to_the_previous_one(tmp_path, caplog):
    first = _trained(tmp_path, 2000)
    folder = tmp_path / "test" / "checkpoints"
    numbered = sorted(folder.glob("checkpoint_*.ckpt"))[-1]
    _trained(tmp_path, 3000)
    newest = sorted(folder.glob("checkpoint_*.ckpt"))[-1]
    state = torch.load(folder / "last.ckpt", weights_only=True)
    name = next(k for k, v in state["state_dict"].items() if v.dim() == 2)
    shape = list(state["state_dict"][name].shape)
    state["state_dict"][name] = torch.zeros(3, 3)
    torch.save(state, folder / "last.ckpt")  # in place: both names of the newest checkpoint (one file)
    caplog.set_level(logging.INFO, logger="sf_hydra")
    second = _trained(tmp_path, 4000)
    said = [r.getMessage() for r in caplog.records if "does not fit the model" in r.getMessage()]
    assert len(said) == 2, caplog.text
    assert said[0].startswith(f"checkpoint {folder / 'last.ckpt'} does not fit the model") and newest.name in said[1]
    assert f"its {name} has shape [3, 3], the model's {shape}" in said[0]
    assert f"resuming from {numbered} instead" in caplog.text and f"{first['env_steps']} env steps" in caplog.text
    assert second["env_steps"] >= 4000 and second["policy_version"] > first["policy_version"]
