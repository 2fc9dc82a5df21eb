"""A policy network is built from the run's ModelRecipe: the model node as its schema's dataclass and the few env
and algo values a network reads, no config node. It pickles small, so a spawned process (a rollout worker, an
inference server, the evaluation process) builds from it the network the learner built; a run's saved config
(plain YAML, as Policy.load reads it) gives the same recipe as the composed config."""

import dataclasses
import hashlib
import multiprocessing
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from sf_hydra.config.schema import ModelConfig
from sf_hydra.models import build_model, model_recipe

OBS = gym.spaces.Dict({"obs": gym.spaces.Box(0, 255, (3, 36, 48), np.uint8),
                       "measurements": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
ACTIONS = gym.spaces.Discrete(3)
OVERRIDES = ("env=doom/basic", "model.rnn_size=16", "algo.normalize_input_keys=[measurements]",
             "algo.kl_loss_coeff=0.1")


def _built(recipe) -> dict:
    """What a network built from `recipe` (from one seed) holds: each tensor's bytes (a digest: exact, whatever
    thread count a sum would reduce with in each process), and the numbers it records per step of the behaviour
    distribution."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as every process of a run (hardware.torch_threads): orthogonal init's QR follows it
    try:
        torch.manual_seed(5)
        model = build_model(recipe, OBS, ACTIONS)
    finally:
        torch.set_num_threads(threads)
    digests = {k: hashlib.sha256(v.detach().contiguous().numpy().tobytes()).hexdigest()
               for k, v in model.state_dict().items()}
    return {**digests, "params": model.action_dist_params_size}


def test_the_recipe_holds_the_typed_model_node_and_plain_values(tmp_cfg):
    recipe = model_recipe(tmp_cfg(*OVERRIDES))
    assert type(recipe.model) is ModelConfig and recipe.model.rnn_size == 16
    values = {f.name: getattr(recipe, f.name) for f in dataclasses.fields(recipe) if f.name != "model"}
    assert values == {"env_id": "basic", "obs_scale": 255.0, "obs_subtract_mean": 0.0, "normalize_input": True,
                      "normalize_input_keys": ("measurements",), "normalize_returns": True, "kl_loss_coeff": 0.1}
    assert not any(OmegaConf.is_config(v) for v in dataclasses.asdict(recipe).values())
    assert len(pickle.dumps(recipe)) < 2048


def test_a_saved_config_gives_the_composed_configs_recipe(tmp_cfg, tmp_path):
    cfg = tmp_cfg(*OVERRIDES)
    saved = tmp_path / "config.yaml"
    saved.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    assert model_recipe(OmegaConf.load(saved)) == model_recipe(cfg)


def _build_in_child(recipe, out):
    out.put(_built(recipe))


@pytest.mark.slow
def test_a_spawned_process_builds_the_same_network_from_the_pickled_recipe(tmp_cfg):
    recipe = model_recipe(tmp_cfg(*OVERRIDES))
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_build_in_child, args=(recipe, out))
    child.start()
    got = out.get(timeout=120)
    child.join(timeout=30)
    here = _built(recipe)
    assert got == here and here["params"] == 3  # same layers, same initial weights; the KL loss's logits recorded
    assert any(k.startswith("preprocess.norms.measurements") for k in here)
    assert not any(k.startswith("preprocess.norms.obs") for k in here)
