"""Reproducible runs (hardware.serial_mode=true and a seed): two runs give bit-identical checkpoints (CartPole,
Doom basic), and a run stopped and resumed gives the checkpoint of one that never stopped (CartPole: its envs
are pickled mid-episode in the checkpoint; Doom: its games are re-created and their episodes replayed from the
saved seed and actions); hardware.reproducible=true refuses what a seed cannot repeat."""

import importlib.util
import json
import logging
import pickle

import numpy as np
import pytest
import torch

from sf_hydra.app.checks import check_config
from sf_hydra.app.train import train
from sf_hydra.config import ConfigError
from sf_hydra.envs import make_env
from tests.conftest import compose_cfg, make_cfg

SERIAL = ("hardware.serial_mode=true", "hardware.reproducible=true", "seed=3", "save_every_sec=1000")
# CartPole's file decays the learning rate to 0 at train_for_env_steps: a run given a longer budget on resume
# follows another schedule by design; a constant rate keeps the stopped run's budget out of its weights
CARTPOLE = (*SERIAL, "algo.lr_schedule=constant")


def _checkpoint(run_dir) -> dict:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)


def _differences(a: dict, b: dict) -> list:
    """What differs between two checkpoints' learner states (weights and normalizers, Adam's moments, counters
    and episode windows); the training seconds are the clock's."""
    out = [k for k in a["state_dict"] if not torch.equal(a["state_dict"][k], b["state_dict"][k])]
    for opt_a, opt_b in zip(a["optimizer_states"], b["optimizer_states"]):
        for (i, sa), sb in zip(opt_a["state"].items(), opt_b["state"].values()):
            out += [f"optimizer {i} {name}" for name in sa if not torch.equal(torch.as_tensor(sa[name]),
                                                                               torch.as_tensor(sb[name]))]
    ours_a, ours_b = dict(a["sf_hydra"]), dict(b["sf_hydra"])
    ours_a.pop("train_seconds"), ours_b.pop("train_seconds")
    for pa, pb in zip(ours_a.pop("policies"), ours_b.pop("policies")):
        out += [f"policy stats {k}" for k in pa if k != "train_seconds" and pa[k] != pb[k]]
    return out + [k for k in ours_a if ours_a[k] != ours_b[k]]


@pytest.mark.slow
def test_two_serial_cartpole_runs_are_bit_identical_and_a_resume_equals_no_stop(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="sf_hydra")
    steps = "train_for_env_steps=4000"
    train(make_cfg(tmp_path / "a", steps, *CARTPOLE))
    train(make_cfg(tmp_path / "b", steps, *CARTPOLE))
    a = _checkpoint(tmp_path / "a" / "test")
    assert a["sf_hydra"]["env_steps"] >= 4000 and a["sf_hydra"]["policy_version"] > 10
    assert _differences(a, _checkpoint(tmp_path / "b" / "test")) == []

    # stopped at 2048 env steps, resumed to the same budget: the checkpoint of the run that never stopped
    train(make_cfg(tmp_path / "c", "train_for_env_steps=2000", *CARTPOLE))
    train(make_cfg(tmp_path / "c", steps, *CARTPOLE))
    assert "serial rollout workers continue from the checkpoint" in caplog.text
    assert _differences(a, _checkpoint(tmp_path / "c" / "test")) == []

    # without the saved state (generators, envs mid-episode) the resumed run goes elsewhere
    train(make_cfg(tmp_path / "d", "train_for_env_steps=2000", *CARTPOLE, "~callbacks.resume_state"))
    train(make_cfg(tmp_path / "d", steps, *CARTPOLE, "~callbacks.resume_state"))
    assert "policies.0.action_head.linear.weight" in _differences(a, _checkpoint(tmp_path / "d" / "test"))


def _decisions(run_dir) -> list:
    """PBT's looks (events.jsonl) without their wall-clock times."""
    lines = (run_dir / "pbt" / "events.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in lines]


def _evaluations(run_dir) -> dict:
    """(evaluation number, env steps, policy versions) -> per policy (return, length), for each evaluation."""
    lines = (run_dir / "eval" / "evaluations.jsonl").read_text().splitlines()
    return {(r["evaluation"], r["env_steps"], tuple(p["version"] for p in r["policies"])):
            [(p["return"], p["length"]) for p in r["policies"]] for r in map(json.loads, lines)}


# PBT ranked by the training episodes, beside evaluation during training: what reproducible=true still takes
# (ranking by eval/return, or stopping on it, is refused: test_reproducible_refuses_what_a_seed_cannot_repeat)
PBT_AND_EVAL = ("algo.num_policies=2", "pbt.with_pbt=true", "pbt.period_env_steps=500", "pbt.start_mutation=500",
                "pbt.mutation_rate=1.0", "eval.every_env_steps=1000", "eval.episodes=2", "eval.max_episode_steps=100")


@pytest.mark.slow
def test_two_serial_runs_with_pbt_and_evaluation_are_bit_identical(tmp_path):
    """Evaluation beside training feeds none of training's decisions under hardware.reproducible=true, and
    PBT ranks by the training episodes: two runs give the same weights and the same PBT decisions. Which
    weights an evaluation plays is the clock's (one evaluation at a time: a point passed while one runs is
    served when it ends), so only the evaluations of the same weights are compared: the same games. That is
    why ranking or stopping by them is refused."""
    steps = "train_for_env_steps=4000"
    train(make_cfg(tmp_path / "a", steps, *CARTPOLE, *PBT_AND_EVAL))
    train(make_cfg(tmp_path / "b", steps, *CARTPOLE, *PBT_AND_EVAL))
    a, b = tmp_path / "a" / "test", tmp_path / "b" / "test"
    assert _differences(_checkpoint(a), _checkpoint(b)) == []
    decisions = _decisions(a)
    assert len(decisions) >= 4 and {d["policy"] for d in decisions} == {0, 1}, decisions
    assert decisions == _decisions(b)
    evaluations_a, evaluations_b = _evaluations(a), _evaluations(b)
    same_weights = evaluations_a.keys() & evaluations_b.keys()
    assert same_weights and all(evaluations_a[k] == evaluations_b[k] for k in same_weights)


DOOM = ("env=doom/basic", "hardware.num_envs_per_worker=2", *SERIAL, "algo.lr_schedule=constant")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vizdoom") is None, reason="needs vizdoom (the doom extra)")
def test_two_serial_doom_basic_runs_are_bit_identical_and_a_resume_equals_no_stop(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="sf_hydra")
    steps = "train_for_env_steps=2000"
    train(make_cfg(tmp_path / "a", steps, *DOOM))
    train(make_cfg(tmp_path / "b", steps, *DOOM))
    a = _checkpoint(tmp_path / "a" / "test")
    assert a["sf_hydra"]["env_steps"] >= 2000
    assert _differences(a, _checkpoint(tmp_path / "b" / "test")) == []

    # stopped mid-episode, resumed: the envs are re-created and their episodes replayed (DoomEnv's pickling)
    train(make_cfg(tmp_path / "c", "train_for_env_steps=1000", *DOOM))  # one batch of two
    train(make_cfg(tmp_path / "c", steps, *DOOM))
    assert "serial rollout workers continue from the checkpoint" in caplog.text
    assert _differences(a, _checkpoint(tmp_path / "c" / "test")) == []


@pytest.mark.skipif(importlib.util.find_spec("vizdoom") is None, reason="needs vizdoom (the doom extra)")
def test_a_pickled_doom_env_replays_its_episode_and_refuses_a_diverged_one():
    from sf_hydra.envs.doom.env import EnvReplayError

    env = make_env(compose_cfg("env=doom/basic", "env.episode_counter=true").env, seed=5)
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(130):  # past an episode's end (the counter wrapper's state) and into the next
        if any(env.step(int(rng.integers(4)))[2:4]):
            env.reset()
    saved = pickle.dumps(env)
    copy = pickle.loads(saved)
    assert copy.episodes == env.episodes > 0
    for _ in range(200):  # the copy plays on as the original, through resets (their seeds continue)
        action = int(rng.integers(4))
        a, b = env.step(action), copy.step(action)
        assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4]
        if a[2] or a[3]:
            assert np.array_equal(env.reset()[0], copy.reset()[0])

    doom = env.unwrapped
    state = doom.__getstate__()
    assert len(state["actions"]) < 75 and state["episode_seed"] is not None  # this episode's actions only
    state["actions"] = state["actions"][:-1] or [0]  # one action short (or one too many): another observation
    with pytest.raises(EnvReplayError, match="did not reproduce its last observation"):
        type(doom).__new__(type(doom)).__setstate__(state)
    env.close(), copy.close()


@pytest.mark.skipif(importlib.util.find_spec("vizdoom") is None, reason="needs vizdoom (the doom extra)")
def test_a_doom_game_with_bots_refuses_to_be_pickled():
    """Its host and bots are not replayed: the checkpoint goes on without the workers' state (one warning)."""
    env = make_env(compose_cfg("env=doom/deathmatch_bots").env, seed=1)
    try:
        with pytest.raises(TypeError, match="network game"):
            pickle.dumps(env)
    finally:
        env.close()


@pytest.mark.parametrize("overrides, key, reason", [
    (("hardware.serial_mode=false",), "hardware.serial_mode", "policy lag"),
    (("hardware.serial_mode=true", "algo.num_policies=2", "pbt.with_pbt=true", "pbt.target_objective=eval/return",
      "eval.every_env_steps=1000"), "pbt.target_objective", "whenever"),
    (("hardware.serial_mode=true", "eval.every_env_steps=1000", "eval.stop_on_eval_return=true",
      "train_until_avg_return=100"), "eval.stop_on_eval_return", "whenever"),
    (("hardware.serial_mode=true", "seed=null"), "seed", "entropy"),
    (("hardware.serial_mode=true", "train_for_seconds=60"), "train_for_seconds", "clock"),
    (("hardware.serial_mode=true", "hardware.device=cuda"), "hardware.device", "CUDA"),
])
def test_reproducible_refuses_what_a_seed_cannot_repeat(overrides, key, reason):
    with pytest.raises(ConfigError) as e:
        check_config(compose_cfg("hardware.reproducible=true", *overrides))
    assert e.value.key == key and reason in e.value.allowed
