"""The Python policy (sf_hydra.Policy): loaded from a trained run folder or a checkpoint file, it acts as the
learner's network does on one observation or a batch, carries a recurrent state, honours action masks, and is
light to import (no Lightning, no Hydra compose)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra import Policy
from sf_hydra.app.train import train
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.spaces import space_from_json
from tests.conftest import make_cfg
from tests.faults.runs import env_with_repo
from tests.helpers.masked_envs import MaskedEnv

SMALL = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.batch_size=64")


def _trained(tmp_path_factory, name: str, *overrides: str):
    root = tmp_path_factory.mktemp(name)
    train(make_cfg(root, *SMALL, "train_for_env_steps=3000", *overrides))
    return root / "test"


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    return _trained(tmp_path_factory, "mlp")


@pytest.fixture(scope="module")
def rnn_run(tmp_path_factory):
    return _trained(tmp_path_factory, "rnn", "model.use_rnn=true", "algo.rollout=16", "algo.recurrence=16")


def _learner_weights(ckpt, policy: int = 0) -> dict:
    state = torch.load(ckpt, weights_only=True)["state_dict"]
    prefix = f"policies.{policy}."
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def _cartpole_obs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.5, (n, 4)).astype(np.float32)


@pytest.mark.slow
def test_a_run_folder_loads_its_newest_weights_and_spaces(mlp_run):
    policy = Policy.load(mlp_run)
    assert policy.origin.checkpoint == mlp_run / "checkpoints" / "last.ckpt"
    assert policy.origin.env_steps >= 3000
    saved = json.loads((mlp_run / "spaces.json").read_text())
    cartpole = gym.make("CartPole-v1")
    assert space_from_json(saved["observation"]) == policy.observation_space == cartpole.observation_space
    assert policy.action_space == gym.spaces.Discrete(2)
    learned = _learner_weights(policy.origin.checkpoint)
    assert learned and all(torch.equal(policy.model.state_dict()[k], v) for k, v in learned.items())


@pytest.mark.slow
def test_one_observation_and_a_batch_act_alike(mlp_run):
    policy = Policy.load(mlp_run)
    obs = _cartpole_obs(5)
    batch, state = policy.act(obs, deterministic=True)
    assert state is None and isinstance(batch, np.ndarray) and batch.shape == (5,)
    singles = [policy.act(o, deterministic=True)[0] for o in obs]
    assert all(isinstance(a, int) for a in singles) and singles == batch.tolist()
    as_list, _ = policy.act(list(obs), deterministic=True)
    assert as_list.tolist() == singles
    # What the learner's network chooses (its own normalizer inside), from the same weights
    expected = policy.model.act({"obs": torch.as_tensor(obs)}, None, deterministic=True).actions
    assert batch.tolist() == expected.tolist()


@pytest.mark.slow
def test_a_checkpoint_file_loads_and_bad_arguments_are_named(mlp_run):
    numbered = sorted((mlp_run / "checkpoints").glob("checkpoint_*.ckpt"))[-1]
    assert Policy.load(numbered).origin.checkpoint == numbered
    with pytest.raises(ConfigError, match="kind='newest'.*last or best"):
        Policy.load(mlp_run, kind="newest")
    with pytest.raises(ConfigError, match="policy=3.*0 to 0"):
        Policy.load(mlp_run, policy=3)
    with pytest.raises(FileNotFoundError, match="neither a run folder nor a checkpoint"):
        Policy.load(mlp_run / "nothing_here")
    with pytest.raises(ValueError, match=r"takes \(4,\)"):
        Policy.load(mlp_run).act(np.zeros((2, 3, 4), np.float32))


@pytest.mark.slow
def test_a_run_without_spaces_json_builds_its_env_once_to_read_them(mlp_run, tmp_path):
    """Runs trained before spaces.json was written."""
    import shutil

    copy = tmp_path / "old_run"
    shutil.copytree(mlp_run, copy)
    (copy / "spaces.json").unlink()
    policy = Policy.load(copy)
    assert policy.observation_space.shape == (4,) and policy.action_space == gym.spaces.Discrete(2)


@pytest.mark.slow
def test_the_recurrent_state_carries_over_and_equals_an_unrolled_episode(rnn_run):
    policy = Policy.load(rnn_run)
    assert policy.recurrent
    obs = _cartpole_obs(6, seed=1)
    state = None
    actions = []
    for o in obs:
        action, state = policy.act(o, state, deterministic=True)
        actions.append(action)
    assert state.shape == (1, policy.model.rnn_state_size) and bool(state.abs().sum() > 0)
    # The same steps through the network by hand: the state each step returned goes into the next
    h = torch.zeros(1, policy.model.rnn_state_size)
    expected = []
    for o in obs:
        out = policy.model.act({"obs": torch.as_tensor(o[None])}, h, deterministic=True)
        expected.append(int(out.actions[0]))
        h = out.rnn_states
    assert actions == expected and torch.equal(state, h)
    # A batch of envs: one state row each
    batch, states = policy.act(obs[:3], policy.initial_state(3), deterministic=True)
    assert states.shape == (3, policy.model.rnn_state_size) and batch.shape == (3,)


@pytest.mark.slow
def test_dict_observations_with_an_action_mask_are_obeyed(tmp_path_factory):
    run = _trained(tmp_path_factory, "masked", "env=gym/any", "env.id=tests.helpers.masked_envs:Masked-v0",
                   "train_for_env_steps=2000")
    policy = Policy.load(run)
    env = MaskedEnv()
    obs, _ = env.reset(seed=0)
    for _ in range(200):
        action, _ = policy.act(obs)  # sampled: a forbidden action has probability 0
        assert obs["action_mask"][action] == 1
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()


@pytest.mark.slow
def test_loading_and_acting_import_no_lightning_and_compose_no_config(mlp_run):
    """Hydra's package may load (the network is built from its `_target_` nodes by instantiate), but nothing is
    composed: Hydra's global state stays uninitialised."""
    code = ("import sys, time, numpy as np\nt0 = time.monotonic()\nfrom sf_hydra import Policy\n"
            f"p = Policy.load({str(mlp_run)!r})\nt1 = time.monotonic()\np.act(np.zeros(4, np.float32))\n"
            "from hydra.core.global_hydra import GlobalHydra\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('lightning', 'pytorch_lightning')]\n"
            "print('HEAVY', heavy, 'COMPOSED', GlobalHydra.instance().is_initialized(), 'SECONDS', round(t1 - t0, 2))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env_with_repo(), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "HEAVY [] COMPOSED False" in out.stdout, out.stdout


@pytest.mark.slow
def test_readmes_python_example_plays_an_episode(mlp_run):
    """The docs' `sf_hydra.Policy` block (docs/guides/after-training.md), as written, on a trained CartPole run in
    place of train_dir/cartpole."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "after-training.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    block = next(b for b in blocks if "Policy.load" in b)
    assert 'Policy.load("train_dir/cartpole")' in block
    code = block.replace('"train_dir/cartpole"', repr(str(mlp_run)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env_with_repo(), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.fullmatch(r"return \d+\.0\n", out.stdout), out.stdout


@pytest.mark.slow
def test_a_run_saved_by_an_older_sf_hydra_loads_with_todays_defaults(mlp_run, tmp_path):
    """A config.yaml without the keys added since (sf_hydra.config.saved): migrated once when it is read, the
    run loads and acts, and its config holds the schema's defaults, policy_assignment as such a run behaved."""
    from sf_hydra.evaluation.policy import load_run_config
    from tests.helpers.older_config import saved_without

    old = saved_without(mlp_run, tmp_path / "old_run")
    policy = Policy.load(old)
    learned = _learner_weights(policy.origin.checkpoint)
    assert learned and all(torch.equal(policy.model.state_dict()[k], v) for k, v in learned.items())
    assert policy.act(_cartpole_obs(1)[0])[0] in (0, 1)
    cfg = load_run_config(old)
    assert (cfg.algo.num_policies, cfg.algo.async_rl, cfg.seed, cfg.eval.every_sec) == (1, True, 0, 0.0)
    assert (cfg.model.action_head_init_gain, cfg.env.pixel_format, cfg.logger.with_wandb) == (0.01, "CHW", False)
    assert cfg.algo.policy_assignment == "per_episode"  # each env drew its policy per episode before the key
