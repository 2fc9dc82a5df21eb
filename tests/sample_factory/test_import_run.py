"""`sf-import-run` (sf_hydra.app.import_sf_run): runs made by Sample Factory 2.1.1 itself, imported as our run
folders. The fixtures (tests/data/sample_factory/<run>/, README.md there says how they were made) are Sample
Factory's own files (config.json, checkpoint_p0/*.pth) and reference.npz: observations one env gave, with the
action logits and values Sample Factory's actor-critic computed for them in its own venv
(benchmarks/sf_reference_outputs.py). Our imported policy must compute the same on the same observations (the
Doom conv+GRU over a sequence, its state carried and zeroed after each episode's end), play in enjoy.py, train
on from the imported env steps and weights, and come in through sf-pull from a Sample Factory Hub repo. Where
Sample Factory's venv exists (SF_PYTHON, or the benchmarks' peer venv: ~/.cache/sf_hydra/peers/sf_venv/bin/python, made
by benchmarks/vs_sample_factory.py --setup), its outputs are computed anew too."""

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sf_hydra.app.import_sf_run import SF_REWARD_SCALE, load_sf_checkpoint, sf_score_line
from sf_hydra.app.import_sf_run import main as import_main
from sf_hydra.evaluation.policy import Policy
from tests.faults.runs import env_with_repo

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _common import peer_dir  # noqa: E402 (the benchmarks' folder: where the peers' venvs are)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "sample_factory"
CARTPOLE, DOOM = DATA / "cartpole_mlp", DATA / "doom_basic"
TOLERANCE = 1e-5  # largest |ours - Sample Factory's| of a logit or value (float32 arithmetic, same order)
SF_PYTHON = Path(os.environ.get("SF_PYTHON") or peer_dir("sf_venv") / "bin" / "python")
SF_DOOM_BASIC_SCALE = SF_REWARD_SCALE["doom_basic"]  # Sample Factory's doom_basic env multiplies the game's rewards
GUIDE = REPO / "docs" / "guides" / "sample-factory.md"


def imported(source: Path, train_dir: Path, name: str = "run", *more: str) -> Path:
    code = import_main([str(source), f"experiment={name}", f"train_dir={train_dir}", *more])
    assert code == 0
    return train_dir / name


def largest_differences(run_dir: Path, reference: Path):
    """(max |logit diff|, max |value diff|, steps) of our imported policy against Sample Factory's outputs, one env's
    steps in order: the recurrent state carried, zeroed after an episode's end."""
    ref = np.load(reference)
    model = Policy.load(run_dir).model
    keys = [k[len("obs__"):] for k in ref.files if k.startswith("obs__")]
    state = torch.zeros(1, model.rnn_state_size) if model.core is not None else None
    logit_diff = value_diff = 0.0
    with torch.no_grad():
        for t, done in enumerate(ref["dones"]):
            obs = {k: torch.as_tensor(ref[f"obs__{k}"][t:t + 1]) for k in keys}
            dist, values, state = model.forward_step(obs, state)
            logit_diff = max(logit_diff, float((dist.params()[0] - torch.as_tensor(ref["logits"][t])).abs().max()))
            value_diff = max(value_diff, abs(float(values[0]) - float(ref["values"][t])))
            if done and state is not None:
                state = torch.zeros_like(state)
    return logit_diff, value_diff, len(ref["dones"])


def test_cartpole_logits_and_values_equal_sample_factorys(tmp_path):
    run_dir = imported(CARTPOLE, tmp_path)
    logit_diff, value_diff, steps = largest_differences(run_dir, CARTPOLE / "reference.npz")
    assert steps >= 200
    assert logit_diff <= TOLERANCE and value_diff <= TOLERANCE
    # the config came through the config import: Sample Factory's model and input normalization
    cfg = json.loads((run_dir / "imported_from.json").read_text())
    assert "model.nonlinearity=elu" in cfg["overrides"] and "algo.normalize_input=true" in cfg["overrides"]


@pytest.mark.slow  # builds a Doom env; a few hundred conv+GRU steps
def test_doom_conv_gru_logits_equal_sample_factorys_over_episodes(tmp_path):
    run_dir = imported(DOOM, tmp_path)
    ref = np.load(DOOM / "reference.npz")
    assert ref["dones"].sum() >= 2  # the state is zeroed between episodes inside the sequence
    logit_diff, value_diff, _ = largest_differences(run_dir, DOOM / "reference.npz")
    assert logit_diff <= TOLERANCE and value_diff <= TOLERANCE
    # the fixture's checkpoint holds no optimizer state: Adam starts afresh
    assert json.loads((run_dir / "imported_from.json").read_text())["adam_moments"] is False


def test_the_migration_guide_gives_sample_factorys_doom_units():
    """docs/guides/sample-factory.md: doom_basic's factor is the one the score comparison below divides by, and its
    example is this run's score.json in both units."""
    guide = " ".join(GUIDE.read_text().split())
    row = next(line for line in GUIDE.read_text().splitlines() if line.startswith("| `doom_basic`"))
    assert f"| {SF_DOOM_BASIC_SCALE} |" in row, row
    mean = json.loads((DOOM / "score.json").read_text())["mean_return"]
    assert f"the mean of {mean:.3f} over 50 episodes" in row and f"is our {mean / SF_DOOM_BASIC_SCALE:.1f}" in row, row
    for pitfall in ("train_for_seconds", "--device=cpu", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1"):
        assert pitfall in guide, pitfall


@pytest.mark.slow  # enjoy.py plays 30 Doom episodes (~30 s)
def test_the_imported_doom_agent_scores_what_it_scored_in_sample_factory(tmp_path):
    """Ours plays the imported agent in our Doom env; its mean return lies within the spread of the returns Sample
    Factory's own play gave (score.json: 50 episodes; its doom_basic env scales rewards by 0.01). The frames must
    be the ones it was trained on (Sample Factory's scenario render settings): with ViZDoom's stock ones the
    agent, still computing the same function, scored far below."""
    run_dir = imported(DOOM, tmp_path, "doom")
    sf = json.loads((DOOM / "score.json").read_text())
    sf_mean, sf_std = sf["mean_return"] / SF_DOOM_BASIC_SCALE, sf["std_return"] / SF_DOOM_BASIC_SCALE
    enjoy = subprocess.run([sys.executable, str(REPO / "enjoy.py"), f"train_dir={tmp_path}", "experiment=doom",
                            "episodes=30"], capture_output=True, text=True, timeout=300, env=env_with_repo())
    assert enjoy.returncode == 0, enjoy.stderr[-3000:]
    ours = json.loads((run_dir / "enjoy" / "eval.json").read_text())
    assert abs(ours["mean_return"] - sf_mean) <= sf_std, (ours["mean_return"], ours["std_return"], sf_mean, sf_std)


@pytest.mark.slow  # a short Doom training session
def test_the_imported_doom_agent_trains_on(tmp_path):
    """`train.py experiment=<the imported Doom run>` (no env typed: the saved config's Doom env is resumed)
    trains the conv+GRU on from the env steps Sample Factory reached."""
    run_dir = imported(DOOM, tmp_path, "doom")
    start = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["sf_hydra"]["env_steps"]
    train = subprocess.run([sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=doom",
                            f"train_for_env_steps={start + 4096}", "hardware.num_workers=1"],
                           capture_output=True, text=True, timeout=300, env=env_with_repo())
    assert train.returncode == 0, (train.stdout + train.stderr)[-3000:]
    after = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["sf_hydra"]["env_steps"]
    assert start + 4096 <= after < start + 40_000


def test_the_import_says_sample_factorys_score_in_our_units_and_the_budget_it_keeps(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="sf_hydra"):
        imported(DOOM, tmp_path, "doom")
    best = load_sf_checkpoint(next((DOOM / "checkpoint_p0").glob("checkpoint_*.pth")))["best_performance"]
    said = caplog.text
    assert (f"Sample Factory's best average return: {best:.4g} in its units, {best / SF_DOOM_BASIC_SCALE:.4g} in "
            "ours (its doom_basic env multiplies rewards by 0.01)") in said, said[-2000:]
    assert "budgets kept from Sample Factory's config.json: train_for_env_steps=" in said
    assert "train_for_seconds=" in said and "sf-train experiment=doom train_for_env_steps=..." in said
    assert sf_score_line("doom_basic", -1e9) == "Sample Factory's checkpoint holds no score (best_performance)"
    assert "in ours" not in sf_score_line("doom_health_gathering", 10.0)


def test_the_checkpoint_holds_the_run_sample_factory_reached(tmp_path):
    """Env steps and train step carried over; Adam's moments re-indexed from Sample Factory's parameter order
    to ours; a checkpoint without optimizer state imports with fresh moments."""
    run_dir = imported(CARTPOLE, tmp_path)
    sf = load_sf_checkpoint(next((CARTPOLE / "checkpoint_p0").glob("checkpoint_*.pth")))
    ours = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert ours["sf_hydra"]["env_steps"] == sf["env_steps"] and ours["sf_hydra"]["policy_version"] == sf["train_step"]
    names = [k for k in ours["state_dict"] if not k.startswith(("policies.0.preprocess.", "policies.0.returns_norm"))]
    head = names.index("policies.0.action_head.linear.weight")
    sf_names = [k for k in sf["model"] if "normalizer" not in k]
    sf_head = sf_names.index("action_parameterization.distribution_linear.weight")
    assert sf_head != head  # the orders differ (SF: critic_linear first): the moments follow the names
    moved = ours["optimizer_states"][0]["state"][head]["exp_avg"]
    assert torch.equal(moved, sf["optimizer"]["state"][sf_head]["exp_avg"])

    stripped = tmp_path / "stripped"
    shutil.copytree(CARTPOLE, stripped)
    ckpt_file = next((stripped / "checkpoint_p0").glob("*.pth"))
    torch.save({k: v for k, v in sf.items() if k != "optimizer"}, ckpt_file)
    run_dir = imported(stripped, tmp_path / "train", "stripped")
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["optimizer_states"][0]["state"] == {}


def _doctored(tmp_path: Path, config=None, weights=None) -> Path:
    folder = tmp_path / "doctored"
    shutil.copytree(CARTPOLE, folder)
    if config:
        cfg = json.loads((folder / "config.json").read_text())
        cfg.update(config)
        (folder / "config.json").write_text(json.dumps(cfg))
    if weights:
        path = next((folder / "checkpoint_p0").glob("*.pth"))
        state = load_sf_checkpoint(path)
        weights(state["model"])
        torch.save(state, path)
    return folder


@pytest.mark.parametrize("config,weights,part", [
    ({"encoder_mlp_layers": [32]}, None, "encoder.encoders.obs"),  # a config whose model differs from the weights
    (None, lambda m: m.update({"encoder.encoders.obs.attention.0.weight": torch.zeros(4, 4)}), "encoder.encoders.obs"),
    (None, lambda m: m.update({"custom_head.weight": torch.zeros(2, 2)}), "custom_head.weight"),
])
def test_a_part_that_cannot_be_mapped_is_refused_naming_it(tmp_path, caplog, config, weights, part):
    folder = _doctored(tmp_path, config, weights)
    assert import_main([str(folder), "experiment=x", f"train_dir={tmp_path / 'train'}"]) == 2
    said = caplog.text
    assert "sample_factory_model" in said and part in said
    assert not (tmp_path / "train" / "x").exists()


@pytest.mark.parametrize("args,key", [
    (["experiment=x"], "source"),
    ([str(CARTPOLE), "colour=blue"], "colour"),
    ([str(CARTPOLE), "checkpoint=middle"], "checkpoint"),
    ([str(CARTPOLE), "policy=1"], "policy"),
    ([str(DATA / "nowhere")], "source"),
    ([str(CARTPOLE), "experiment=../up"], "experiment"),
])
def test_bad_arguments_are_refused_naming_the_key(tmp_path, caplog, args, key):
    assert import_main([*args, f"train_dir={tmp_path}"]) == 2
    assert f"{key}=" in caplog.text


def test_an_existing_run_folder_is_kept_unless_overwrite(tmp_path, caplog):
    imported(CARTPOLE, tmp_path)
    assert import_main([str(CARTPOLE), "experiment=run", f"train_dir={tmp_path}"]) == 2
    assert "overwrite=true" in caplog.text
    imported(CARTPOLE, tmp_path, "run", "overwrite=true")


@pytest.mark.slow  # enjoy.py and train.py processes
def test_the_imported_run_plays_and_trains_on(tmp_path):
    run_dir = imported(CARTPOLE, tmp_path, "cartpole")
    before = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    enjoy = subprocess.run([sys.executable, str(REPO / "enjoy.py"), f"train_dir={tmp_path}", "experiment=cartpole",
                            "episodes=3"], capture_output=True, text=True, timeout=120, env=env_with_repo())
    assert enjoy.returncode == 0, enjoy.stderr[-3000:]
    played = json.loads((run_dir / "enjoy" / "eval.json").read_text())
    assert len(played["episodes"]) == 3 and played["mean_return"] > 50  # a trained policy (random: about 20)

    start = before["sf_hydra"]["env_steps"]
    train = subprocess.run([sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=cartpole",
                            f"train_for_env_steps={start + 2048}", "hardware.num_workers=1"],
                           capture_output=True, text=True, timeout=300, env=env_with_repo())
    assert train.returncode == 0, (train.stdout + train.stderr)[-3000:]
    after = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert start + 2048 <= after["sf_hydra"]["env_steps"] < start + 20_000  # on from the imported env steps
    assert after["sf_hydra"]["policy_version"] > before["sf_hydra"]["policy_version"]
    steps = [float(s["step"]) for s in after["optimizer_states"][0]["state"].values()]
    sf_steps = [float(s["step"]) for s in before["optimizer_states"][0]["state"].values()]
    assert min(steps) > max(sf_steps)  # Adam went on from Sample Factory's moments
    assert "resuming from last.ckpt" in train.stdout + train.stderr


def test_sf_pull_imports_a_sample_factory_hub_repo(tmp_path):
    """Sample Factory's push_to_hub uploads the experiment folder with a model card and a replay: sf-pull lays
    it out through the import."""
    from sf_hydra.app.hub import pull_main

    pytest.importorskip("huggingface_hub", reason="sf-pull needs the hub extra")
    pytest.importorskip("safetensors", reason="sf-pull needs the hub extra")
    repo = tmp_path / "sf_repo"
    shutil.copytree(CARTPOLE, repo)
    (repo / "README.md").write_text("---\nlibrary_name: sample-factory\n---\n# APPO on CartPole-v1\n")
    (repo / "replay.mp4").write_bytes(b"\x00")
    assert pull_main([f"local_dir={repo}", "experiment=pulled", f"train_dir={tmp_path / 'train'}"]) == 0
    run_dir = tmp_path / "train" / "pulled"
    assert (run_dir / "README.md").is_file() and (run_dir / "enjoy" / "replay.mp4").is_file()
    logit_diff, value_diff, _ = largest_differences(run_dir, CARTPOLE / "reference.npz")
    assert logit_diff <= TOLERANCE and value_diff <= TOLERANCE


@pytest.mark.slow
@pytest.mark.skipif(not SF_PYTHON.is_file(), reason=f"no Sample Factory venv ({SF_PYTHON}; set SF_PYTHON)")
def test_sample_factory_computes_the_same_anew(tmp_path):
    """Sample Factory itself (its venv) plays the fixture run on other observations (another seed); ours
    computes the same on them."""
    out = tmp_path / "ref.npz"
    made = subprocess.run([str(SF_PYTHON), str(REPO / "benchmarks" / "sf_reference_outputs.py"), str(CARTPOLE),
                           "--steps", "200", "--seed", "7", "--out", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    logit_diff, value_diff, steps = largest_differences(imported(CARTPOLE, tmp_path / "train"), out)
    assert steps == 200 and logit_diff <= TOLERANCE and value_diff <= TOLERANCE
