"""`sf-pull` and `sf-import-run` check everything before they touch anything (issue 52, item 3): the run is built
in a folder beside its destination, its config parsed, its checkpoint rebuilt and its weights loaded into the
model its config describes (shapes, dtypes, finite values), and only then renamed into place; an old run under
`overwrite=true` is removed only once the new one is in place. A symbolic link in the source is refused. Each
refusal is one framed line, exit status 2, and the old run folder stays byte for byte as it was."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.faults.runs import env_with_repo

pytest.importorskip("huggingface_hub", reason="sf-pull needs the hub extra (huggingface_hub)")
pytest.importorskip("safetensors", reason="sf-pull needs the hub extra (safetensors)")

REPO = Path(__file__).resolve().parents[2]
SF_CARTPOLE = REPO / "tests" / "data" / "sample_factory" / "cartpole_mlp"
WEIGHT = "policies.0.encoder.encoders.obs.net.1.0.weight"  # the first layer of CartPole's MLP encoder


def _command(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=180,
                          env=env_with_repo(), cwd=cwd)


def _pull(repo: Path, train_dir: Path, *more: str) -> subprocess.CompletedProcess:
    return _command("sf_hydra.app.hub", "pull", f"local_dir={repo}", f"train_dir={train_dir}", *more,
                    cwd=train_dir.parent)


def _hashes(folder: Path) -> dict:
    """{relative path: sha256} of every file under `folder` (links named as links)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[key] = f"-> {os.readlink(path)}"
        elif path.is_file():
            out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _refused(result: subprocess.CompletedProcess, *words: str) -> str:
    """The one framed line of a refusal (exit status 2, no traceback), which names each of `words`."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "bad config:" in line]
    assert len(lines) == 1, result.stderr[-3000:]
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def pushed(short_cartpole_run, tmp_path_factory):
    """A trained CartPole run written as a repo by `sf-push local_dir=` (the shared run is only read)."""
    from sf_hydra.app.hub import push_main

    out = tmp_path_factory.mktemp("pushed") / "repo"
    assert push_main([f"train_dir={short_cartpole_run[0]}", "experiment=test", "repo=me/cartpole",
                      f"local_dir={out}"]) == 0
    return out


@pytest.fixture
def old_run(short_cartpole_run, tmp_path):
    """train_dir/old: a run of the user's own (a copy of the shared run, with its log and TensorBoard files),
    and the hashes of its files."""
    old = tmp_path / "train_dir" / "old"
    shutil.copytree(short_cartpole_run[0] / "test", old)
    (old / "train.log").write_text("the user's own log\n")
    return old, _hashes(old)


@pytest.fixture
def repo(pushed, tmp_path):
    """A copy of the pushed repo to tamper with."""
    copy = tmp_path / "repo"
    shutil.copytree(pushed, copy)
    return copy


def _beside(run: Path) -> list:
    """What the train_dir holds beside the run: no folder the pull built aside is left (the lock file the swap
    takes, empty, stays)."""
    return sorted(p.name for p in run.parent.iterdir() if p.name != f".{run.name}.lock")


def _untouched(old_run):
    old, hashes = old_run
    assert _hashes(old) == hashes
    assert _beside(old) == ["old"]


def _retensor(repo: Path, name: str, value: torch.Tensor) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(repo / "model.safetensors"))
    tensors[name] = value
    save_file(tensors, str(repo / "model.safetensors"))


def test_a_truncated_checkpoint_json_with_overwrite_leaves_the_old_run_whole(repo, old_run):
    text = (repo / "checkpoint.json").read_text()
    (repo / "checkpoint.json").write_text(text[: len(text) // 2])
    _refused(_pull(repo, old_run[0].parent, "experiment=old", "overwrite=true"), "checkpoint.json")
    _untouched(old_run)


def test_a_config_that_is_not_yaml_is_one_line_naming_it(repo, old_run):
    (repo / "config.yaml").write_text("env: {id: [CartPole\n")
    _refused(_pull(repo, old_run[0].parent, "experiment=old", "overwrite=true"), "config.yaml")
    _untouched(old_run)


def test_a_tensor_of_the_wrong_shape_is_refused_at_pull(repo, old_run):
    _retensor(repo, WEIGHT, torch.zeros(3, 3))
    _refused(_pull(repo, old_run[0].parent, "experiment=old", "overwrite=true"), WEIGHT, "shape")
    _untouched(old_run)


def test_a_tensor_of_another_dtype_is_refused_at_pull(repo, old_run):
    from safetensors.torch import load_file

    _retensor(repo, WEIGHT, load_file(str(repo / "model.safetensors"))[WEIGHT].double())
    _refused(_pull(repo, old_run[0].parent, "experiment=new"), WEIGHT, "float64")
    _untouched(old_run)


def test_a_nan_in_the_weights_is_refused(repo, old_run):
    from safetensors.torch import load_file

    weight = load_file(str(repo / "model.safetensors"))[WEIGHT]
    weight[0, 0] = float("nan")
    _retensor(repo, WEIGHT, weight)
    _refused(_pull(repo, old_run[0].parent, "experiment=old", "overwrite=true"), WEIGHT, "finite")
    _untouched(old_run)


@pytest.mark.parametrize("name", ["spaces.json", "eval/secret.txt"])
def test_a_symlink_in_the_source_folder_is_refused(repo, old_run, tmp_path, name):
    outside = tmp_path / "outside.txt"
    outside.write_text("a file outside the repo\n")
    link = repo / name
    link.parent.mkdir(exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(outside)
    _refused(_pull(repo, old_run[0].parent, "experiment=old", "overwrite=true"), str(link))
    _untouched(old_run)


def test_a_good_pull_with_overwrite_replaces_the_old_run(repo, old_run, pushed):
    from sf_hydra.app.hub import join_checkpoint

    old, _ = old_run
    result = _pull(repo, old.parent, "experiment=old", "overwrite=true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert not (old / "train.log").exists() and not (old / "tb").exists()  # nothing of the old run is left
    assert _beside(old) == ["old"]
    from safetensors.torch import load_file

    want = join_checkpoint(load_file(str(pushed / "model.safetensors")),
                           json.loads((pushed / "checkpoint.json").read_text()))
    got = torch.load(old / "checkpoints" / "last.ckpt", weights_only=True)
    assert all(torch.equal(got["state_dict"][k], v) for k, v in want["state_dict"].items())


# -- sf-import-run (and sf-pull of a Sample Factory repo, which goes through it) ----------------------------------
def _sf_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "sf_run"
    shutil.copytree(SF_CARTPOLE, folder)
    return folder


def _import(source: Path, train_dir: Path, *more: str) -> subprocess.CompletedProcess:
    return _command("sf_hydra.app.import_sf_run", str(source), f"train_dir={train_dir}", *more, cwd=train_dir.parent)


def test_an_import_with_nan_weights_leaves_the_old_run_whole(tmp_path, old_run):
    from sf_hydra.app.import_sf_run import load_sf_checkpoint

    source = _sf_copy(tmp_path)
    path = next((source / "checkpoint_p0").glob("*.pth"))
    state = load_sf_checkpoint(path)
    name = next(k for k, v in state["model"].items() if v.is_floating_point() and v.dim() == 2)
    state["model"][name][0, 0] = float("inf")
    torch.save(state, path)
    _refused(_import(source, old_run[0].parent, "experiment=old", "overwrite=true"), "finite")
    _untouched(old_run)


def test_an_import_refuses_a_symlink_in_its_source(tmp_path, old_run):
    source = _sf_copy(tmp_path)
    (source / "config.json").rename(tmp_path / "config.json")
    (source / "config.json").symlink_to(tmp_path / "config.json")
    _refused(_import(source, old_run[0].parent, "experiment=old", "overwrite=true"), str(source / "config.json"))
    _untouched(old_run)


def test_a_truncated_sample_factory_config_is_one_line(tmp_path, old_run):
    source = _sf_copy(tmp_path)
    text = (source / "config.json").read_text()
    (source / "config.json").write_text(text[: len(text) // 2])
    _refused(_pull(source, old_run[0].parent, "experiment=old", "overwrite=true"), "config.json")
    _untouched(old_run)
