"""`sf-push local_dir=X` writes the repo beside X and swaps it in whole under a lock beside X (issue 52, item 4):
a push leaves nothing of an earlier push behind, two pushes into one folder at once leave one whole push (never
a mix), and a folder of the user's own is refused rather than replaced."""

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sf_hydra.app.hub import push_main
from tests.faults.runs import env_with_repo

pytest.importorskip("huggingface_hub", reason="sf-push needs the hub extra (huggingface_hub)")
pytest.importorskip("safetensors", reason="sf-push needs the hub extra (safetensors)")


def _digest(path: Path) -> str:
    """A file's sha256; of a safetensors file, of its tensors (its header's order varies from write to write)."""
    if path.suffix != ".safetensors":
        return hashlib.sha256(path.read_bytes()).hexdigest()
    from safetensors.torch import load_file

    digest = hashlib.sha256()
    for name, tensor in sorted(load_file(str(path)).items()):
        digest.update(f"{name} {tensor.dtype} {list(tensor.shape)}".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def _hashes(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): _digest(p) for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(short_cartpole_run, tmp_path_factory):
    """Two runs whose repos differ in every file but the config: the shared run (copied), and a copy of it
    whose newest checkpoint is its first one and which has no summary.json (stopped before its end)."""
    root = tmp_path_factory.mktemp("push_runs")
    a, b = root / "a", root / "b"
    shutil.copytree(short_cartpole_run[0] / "test", a)
    shutil.copytree(a, b)
    (b / "summary.json").unlink()
    folder = b / "checkpoints"
    (folder / "last.ckpt").unlink()
    shutil.copyfile(sorted(folder.glob("checkpoint_*.ckpt"))[0], folder / "last.ckpt")
    for path in sorted(folder.glob("checkpoint_*.ckpt"))[1:] + sorted(folder.glob("best_*.ckpt")):
        path.unlink()
    return a, b


def _pushed(run: Path, out: Path) -> dict:
    assert push_main([f"run_dir={run}", "repo=me/cartpole", f"local_dir={out}"]) == 0
    return _hashes(out)


@pytest.mark.slow
def test_a_push_leaves_nothing_of_an_earlier_one(runs, tmp_path):
    a, b = runs
    want = _pushed(b, tmp_path / "b")
    assert "summary.json" not in want
    _pushed(a, tmp_path / "repo")
    assert _pushed(b, tmp_path / "repo") == want


@pytest.mark.slow
def test_two_pushes_into_one_folder_at_once_leave_one_whole_push(runs, tmp_path):
    a, b = runs
    wants = [_pushed(a, tmp_path / "a"), _pushed(b, tmp_path / "b")]
    assert wants[0] != wants[1]
    out = tmp_path / "shared" / "repo"
    for _ in range(2):
        pushes = [subprocess.Popen([sys.executable, "-m", "sf_hydra.app.hub", "push", f"run_dir={run}",
                                    "repo=me/cartpole", f"local_dir={out}"], env=env_with_repo(), cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for run in (a, b)]
        for push in pushes:
            assert push.wait(timeout=180) == 0, push.stdout.read()[-3000:]
        assert _hashes(out) in wants
        assert sorted(p.name for p in out.parent.iterdir()) == [".repo.lock", "repo"]  # nothing left aside


@pytest.mark.slow
def test_a_folder_of_the_users_own_is_refused(runs, tmp_path, caplog):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "thesis.tex").write_text("months of work\n")
    assert push_main([f"run_dir={runs[0]}", "repo=me/cartpole", f"local_dir={out}"]) == 2
    assert "thesis.tex" in caplog.text and (out / "thesis.tex").read_text() == "months of work\n"
