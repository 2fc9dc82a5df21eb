"""`sf-push` / `sf-pull` (sf_hydra.app.hub): a trained CartPole run written as a Hub repo into a folder (the
model card's figures, the config, the weights as safetensors, the replay), pulled back from that folder and from
huggingface_hub's own cache offline (HF_HUB_OFFLINE=1, a snapshot laid out as the client lays it), then played
by enjoy.py and trained on. The upload itself (create_repo + upload_folder) needs the network: not run here."""

import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sf_hydra.app.hub import join_checkpoint, pull_main, push_main, split_checkpoint
from sf_hydra.app.train import train
from tests.conftest import make_cfg
from tests.faults.runs import env_with_repo

pytest.importorskip("huggingface_hub", reason="sf-push/sf-pull need the hub extra (huggingface_hub)")
pytest.importorskip("safetensors", reason="sf-push/sf-pull need the hub extra (safetensors)")

REPO = Path(__file__).resolve().parents[2]
SMALL = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.batch_size=64")


def _same(a, b) -> bool:
    """Equal checkpoints: the same keys in the same order, types (tuple is not list; any dict) and tensors."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _hub(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "sf_hydra.app.hub", *args], capture_output=True, text=True,
                          timeout=120, env=env or env_with_repo(), cwd=cwd)


def test_a_checkpoint_survives_safetensors_and_json():
    ckpt = {"epoch": 1, "state_dict": {"policies.0.w": torch.ones(2, 3), "policies.0.b": torch.zeros(3)},
            "optimizer_states": [{"state": {0: {"step": torch.tensor(5.0), "exp_avg": torch.rand(2, 3)}},
                                  "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0]}]}],
            "gen": {"python": (3, (1, 2, 3), None), "numpy": ["MT19937", [1, 2], 0, 0, 0.0], "torch": torch.arange(4)},
            "nan": None, "flag": True}
    tensors, data = split_checkpoint(ckpt)
    assert set(ckpt["state_dict"]) <= set(tensors)
    assert _same(join_checkpoint(tensors, json.loads(json.dumps(data))), ckpt)


@pytest.mark.parametrize("command,args,key", [
    ("push", ["experiment=x", "colour=blue"], "colour"),
    ("push", ["experiment=x"], "repo"),
    ("push", ["experiment=x", "run_dir=y", "local_dir=z"], "experiment"),
    ("push", ["experiment=x", "repo=not a repo"], "repo"),
    ("push", ["experiment=x", "local_dir=z", "kind=worst"], "kind"),
    ("pull", [], "repo"),
    ("pull", ["repo=a/b", "local_dir=z"], "repo"),
    ("pull", ["local_dir=z", "overwrite=maybe"], "overwrite"),
    ("pull", ["local_dir=z", "revision=main"], "revision"),
])
def test_bad_keys_are_refused_with_exit_2(tmp_path, caplog, command, args, key):
    main = push_main if command == "push" else pull_main
    assert main([f"train_dir={tmp_path}", *args]) == 2
    assert f"{key}=" in caplog.text


def test_the_command_line_exits_2_naming_the_key(tmp_path):
    result = _hub("pull", "local_dir=nowhere", f"train_dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 2 and "local_dir='nowhere'" in result.stderr


def test_a_folder_that_is_no_repo_is_named_by_local_dir(tmp_path, caplog):
    (tmp_path / "not_a_repo").mkdir()
    assert pull_main([f"local_dir={tmp_path / 'not_a_repo'}", f"train_dir={tmp_path}"]) == 2
    assert f"bad config: local_dir='{tmp_path / 'not_a_repo'}'" in caplog.text, caplog.text


@pytest.fixture(scope="module")
def played_run(tmp_path_factory):
    """A trained CartPole run (3000 env steps) that enjoy.py played, with a GIF replay."""
    root = tmp_path_factory.mktemp("hub")
    train(make_cfg(root, *SMALL, "train_for_env_steps=3000"))
    enjoy = subprocess.run([sys.executable, str(REPO / "enjoy.py"), f"train_dir={root}", "experiment=test",
                            "episodes=3", "video=true", "video_format=gif", "max_episode_steps=30"],
                           capture_output=True, text=True, timeout=300, env=env_with_repo(), cwd=root)
    assert enjoy.returncode == 0, enjoy.stderr[-3000:]
    return root / "test"


@pytest.fixture(scope="module")
def pushed(played_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("repo") / "cartpole"
    assert push_main([f"train_dir={played_run.parent}", "experiment=test", "repo=me/cartpole",
                      f"local_dir={out}"]) == 0
    return out


@pytest.mark.slow
def test_push_writes_the_card_the_config_the_weights_and_the_replay(played_run, pushed):
    from safetensors.torch import load_file

    names = {p.relative_to(pushed).as_posix() for p in pushed.rglob("*") if p.is_file()}
    assert {"README.md", "config.yaml", "spaces.json", "summary.json", "model.safetensors", "checkpoint.json",
            "enjoy/eval.json", "replay.gif"} <= names
    assert not any(n.endswith((".ckpt", ".pt", ".pkl")) for n in names)  # no pickle travels
    ckpt = torch.load(played_run / "checkpoints" / "last.ckpt", weights_only=True)
    weights = load_file(str(pushed / "model.safetensors"))
    assert all(torch.equal(weights[k], v) for k, v in ckpt["state_dict"].items())
    card = (pushed / "README.md").read_text()
    front = card.split("---")[1]
    assert "library_name: sf_hydra" in front and "- reinforcement-learning" in front and "CartPole-v1" in front
    played = json.loads((played_run / "enjoy" / "eval.json").read_text())
    figure = f"{played['mean_return']:.2f} +/- {played['std_return']:.2f}"
    assert f"value: {figure}" in front and f"**{figure}**" in card and "over 3 episodes" in card
    assert f"frames (env steps) trained: {ckpt['sf_hydra']['env_steps']}" in card
    assert "python train.py experiment=test" in card and "python enjoy.py experiment=test" in card
    assert "sf-pull repo=me/cartpole" in card and "![replay](replay.gif)" in card
    assert "encoder_mlp_layers" in card  # the model


def _check_pulled(run_dir: Path, original: Path):
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert _same(ckpt, torch.load(original / "checkpoints" / "last.ckpt", weights_only=True))
    assert (run_dir / "config.yaml").read_text() == (original / "config.yaml").read_text()
    assert (run_dir / "enjoy" / "replay.gif").is_file()


@pytest.mark.slow
def test_pull_from_a_folder_then_enjoy_and_train_on(played_run, pushed, tmp_path, caplog):
    train_dir = tmp_path / "train_dir"
    assert pull_main([f"local_dir={pushed}", f"train_dir={train_dir}", "experiment=test"]) == 0
    _check_pulled(train_dir / "test", played_run)
    assert pull_main([f"local_dir={pushed}", f"train_dir={train_dir}", "experiment=test"]) == 2  # no overwrite
    assert "overwrite=true" in caplog.text
    assert pull_main([f"local_dir={pushed}", f"train_dir={train_dir}", "experiment=test", "overwrite=true"]) == 0

    enjoy = subprocess.run([sys.executable, str(REPO / "enjoy.py"), f"train_dir={train_dir}", "experiment=test",
                            "episodes=2", "max_episode_steps=30"], capture_output=True, text=True, timeout=300,
                           env=env_with_repo(), cwd=tmp_path)
    assert enjoy.returncode == 0, enjoy.stderr[-3000:]
    assert len(json.loads((train_dir / "test" / "enjoy" / "eval.json").read_text())["episodes"]) == 2

    before = torch.load(train_dir / "test" / "checkpoints" / "last.ckpt", weights_only=True)["sf_hydra"]
    caplog.set_level(logging.INFO, logger="sf_hydra")
    summary = train(make_cfg(train_dir, *SMALL, "train_for_env_steps=4500"))
    after = torch.load(train_dir / "test" / "checkpoints" / "last.ckpt", weights_only=True)["sf_hydra"]
    assert "(resuming from last.ckpt)" in caplog.text  # the rebuilt learner state, optimizer included
    assert after["env_steps"] >= 4500 and after["policy_version"] > before["policy_version"]
    assert after["train_seconds"] > before["train_seconds"] and summary["env_steps"] == after["env_steps"]


def _lay_out_hub_cache(hub_cache: Path, repo_id: str, files: Path) -> str:
    """`files` as huggingface_hub caches a snapshot: blobs/<sha256>, snapshots/<commit>/<path> -> a relative
    link to the blob, refs/main holding the commit."""
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    root = hub_cache / f"models--{repo_id.replace('/', '--')}"
    (root / "blobs").mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    for path in (p for p in files.rglob("*") if p.is_file()):
        blob = hashlib.sha256(path.read_bytes()).hexdigest()
        (root / "blobs" / blob).write_bytes(path.read_bytes())
        link = root / "snapshots" / commit / path.relative_to(files)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(root / "blobs" / blob, link.parent))
    return commit


@pytest.mark.slow
def test_pull_offline_from_the_hub_clients_cache(played_run, pushed, tmp_path):
    hf_home = tmp_path / "hf_home"
    _lay_out_hub_cache(hf_home / "hub", "me/cartpole", pushed)
    env = {k: v for k, v in env_with_repo().items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(hf_home), HF_HUB_OFFLINE="1")
    result = _hub("pull", "repo=me/cartpole", f"train_dir={tmp_path / 'train_dir'}", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    _check_pulled(tmp_path / "train_dir" / "cartpole", played_run)  # the repo's name names the run
    missing = _hub("pull", "repo=me/absent", f"train_dir={tmp_path / 'train_dir'}", env=env, cwd=tmp_path)
    assert missing.returncode == 2 and "repo='me/absent'" in missing.stderr


@pytest.mark.slow
def test_push_hands_the_folder_to_create_repo_and_upload_folder(played_run, monkeypatch, tmp_path):
    """Everything up to the network: the calls and the folder they get (the upload itself is not made here)."""
    import huggingface_hub

    calls = []

    class RecordingApi:
        def create_repo(self, **kwargs):
            calls.append(("create_repo", kwargs))

        def upload_folder(self, **kwargs):
            folder = Path(kwargs["folder_path"])
            calls.append(("upload_folder", {**kwargs, "files": sorted(p.name for p in folder.iterdir())}))
            return type("Info", (), {"commit_url": "https://huggingface.co/me/cartpole/commit/0"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    assert push_main([f"train_dir={played_run.parent}", "experiment=test", "repo=me/cartpole"]) == 0
    (create, created), (upload, uploaded) = calls
    assert create == "create_repo" and created["repo_id"] == "me/cartpole" and created["exist_ok"]
    assert upload == "upload_folder" and uploaded["repo_id"] == "me/cartpole"
    assert {"README.md", "config.yaml", "model.safetensors", "checkpoint.json", "replay.gif"} <= set(uploaded["files"])


@pytest.mark.slow
def test_an_offline_push_fails_at_the_upload_with_exit_1(played_run, tmp_path):
    env = {**env_with_repo(), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = _hub("push", f"train_dir={played_run.parent}", "experiment=test", "repo=me/cartpole", env=env,
                  cwd=tmp_path)
    assert result.returncode == 1 and "uploading to the Hub repo me/cartpole failed" in result.stderr


def test_sample_factory_push_flags_translate_for_enjoy():
    from sf_hydra.app.sample_factory.translate import translate_argv
    from tests.conftest import CONF_DIR

    argv = ["--env=CartPole-v1", "--experiment=cp", "--push_to_hub", "--hf_repository=me/cartpole"]
    assert translate_argv(argv, str(CONF_DIR), stage="enjoy").argv == [
        "experiment=cp", "push_to_hub=true", "hf_repository=me/cartpole"]
    with pytest.raises(ValueError, match="--push_to_hub=True is not allowed: an evaluation flag"):
        translate_argv(["--env=CartPole-v1", "--push_to_hub"], str(CONF_DIR))


def test_enjoy_with_push_to_hub_and_no_repository_exits_2_before_playing(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "enjoy.py"), f"train_dir={tmp_path}", "experiment=none",
                             "push_to_hub=true"], capture_output=True, text=True, timeout=120, env=env_with_repo(),
                            cwd=tmp_path)
    assert result.returncode == 2 and "hf_repository=None" in result.stdout + result.stderr


@pytest.mark.slow
def test_a_run_saved_by_an_older_sf_hydra_pushes_and_pulls(played_run, tmp_path):
    """A run whose config.yaml lacks the keys added since: its card and its landing read today's defaults (one
    APPO policy), and the pulled folder keeps the config as it was saved."""
    from tests.helpers.older_config import saved_without

    old = saved_without(played_run, tmp_path / "old" / "test")
    out = tmp_path / "repo"
    assert push_main([f"train_dir={old.parent}", "experiment=test", f"local_dir={out}"]) == 0
    card = (out / "README.md").read_text()
    assert "- algo: APPO (algo.async_rl=True), 1 policy(ies)" in card, card
    assert pull_main([f"local_dir={out}", f"train_dir={tmp_path / 'pulled'}", "experiment=test"]) == 0
    assert (tmp_path / "pulled" / "test" / "config.yaml").read_text() == (old / "config.yaml").read_text()
