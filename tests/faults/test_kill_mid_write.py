"""A process killed (SIGKILL) at each point of a file's write leaves the previous file whole and loadable: an
export (`sf-export`: the file and its description) and a checkpoint save (the numbered checkpoint, then last.ckpt,
its second name). And every such write flushes the file and then its folder to the disk (fsync), so that a crash
of the machine itself cannot leave a renamed file empty.

The kill is deterministic: the child process holds still at the chosen point (tests/helpers/pause_in_write.py
wraps the writer's fsync and rename in the child only) and says so in a marker file; the test then kills it."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from sf_hydra.app.train import train
from sf_hydra.core import files
from sf_hydra.core.run_dir import LAST, examine, resume_checkpoint
from sf_hydra.evaluation.export import description_path, export
from sf_hydra.evaluation.policy import Policy
from tests.conftest import make_cfg
from tests.faults.runs import REPO, env_with_repo
from tests.helpers.pause_in_write import final_name

PAUSE = "tests.helpers.pause_in_write"


def _kill_at(cmd, marker: Path, timeout: float = 240) -> str:
    """Runs `cmd` in its own session until it writes `marker` (it holds there), then SIGKILLs its process group
    (its rollout workers too). Returns the point it held at."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=env_with_repo(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while not marker.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read().decode(errors="replace") if proc.poll() is not None else ""
                pytest.fail(f"the process never reached the pause (exit {proc.poll()}):\n{out[-3000:]}")
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return marker.read_text()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- an export ------------------------------------------------------------------------------------------------------

@pytest.fixture
def previous_export(short_cartpole_run, tmp_path):
    """An earlier TorchScript export of the shared run's policy 0 (its weights shifted, so that its bytes differ
    from what the killed export writes) at tmp_path/export/policy_0.pt: (path, its sha256)."""
    train_dir, _, _ = short_cartpole_run
    policy = Policy.load(train_dir / "test")
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(1.0)
    path, _ = export(policy, "torchscript", tmp_path / "export" / "policy_0.pt")
    return path, _sha256(path)


@pytest.mark.slow
@pytest.mark.parametrize("target, point", [("policy_0.pt", "writing"), ("policy_0.pt", "written"),
                                           ("policy_0.pt.json", "writing"), ("policy_0.pt.json", "written")])
def test_an_export_killed_while_writing_leaves_the_previous_export_and_its_description(
        short_cartpole_run, previous_export, tmp_path, target, point):
    train_dir, _, _ = short_cartpole_run
    path, sha = previous_export
    before = description_path(path).read_bytes()
    marker = tmp_path / "paused"
    code = (f"import sys; from {PAUSE} import pause; pause({point!r}, {target!r}, {str(marker)!r}); "
            "from sf_hydra.app.export_command import main; sys.exit(main(sys.argv[1:]))")
    held = _kill_at([sys.executable, "-c", code, f"train_dir={train_dir}", "experiment=test", "format=torchscript",
                     f"out={path}"], marker)
    assert held == point
    assert _sha256(path) == sha and description_path(path).read_bytes() == before  # untouched, byte for byte
    assert json.loads(before)["sha256"] == sha
    torch.jit.load(str(path))  # the previous export still loads
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.endswith(".tmp")) == \
        ["policy_0.pt", "policy_0.pt.json"]


@pytest.mark.slow
def test_an_export_killed_between_its_two_renames_leaves_whole_files_its_checksum_tells_apart(
        short_cartpole_run, previous_export, tmp_path):
    """The one point where the pair disagrees (the file renamed, its description not yet): both are whole, and
    the description's sha256 says it describes another file."""
    train_dir, _, _ = short_cartpole_run
    path, sha = previous_export
    marker = tmp_path / "paused"
    code = (f"import sys; from {PAUSE} import pause; pause('renamed', 'policy_0.pt', {str(marker)!r}); "
            "from sf_hydra.app.export_command import main; sys.exit(main(sys.argv[1:]))")
    _kill_at([sys.executable, "-c", code, f"train_dir={train_dir}", "experiment=test", "format=torchscript",
              f"out={path}"], marker)
    torch.jit.load(str(path))  # the new file, whole
    assert json.loads(description_path(path).read_text())["sha256"] == sha != _sha256(path)


# -- a checkpoint save ----------------------------------------------------------------------------------------------

def _steps(path: Path) -> int:
    steps, _, why = examine(path)
    assert steps is not None, f"{path.name} does not load: {why}"
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("target, point", [("checkpoint_*.ckpt", "writing"), ("checkpoint_*.ckpt", "written"),
                                           ("checkpoint_*.ckpt", "renamed"), (LAST, "written"), (LAST, "renamed")])
def test_a_save_killed_at_each_point_leaves_the_previous_checkpoint_loadable(short_cartpole_run, tmp_path,
                                                                             target, point):
    """A copy of the shared run resumed by train.py until its final save, killed inside it: every checkpoint at a
    final name loads, the previous one is there with its env steps, and a resume starts from a whole one."""
    train_dir, summary, _ = short_cartpole_run
    run = tmp_path / "test"
    shutil.copytree(train_dir / "test", run)
    previous = {p.name: _steps(p) for p in (run / "checkpoints").glob("*.ckpt")}
    marker = tmp_path / "paused"
    held = _kill_at([sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=test",
                     f"train_for_env_steps={summary['env_steps'] + 2000}", "save_every_sec=1000",
                     f"+callbacks.pause._target_={PAUSE}.PauseInWrite", f"+callbacks.pause.point={point}",
                     f"+callbacks.pause.target={target}", f"+callbacks.pause.marker={marker}"], marker)
    assert held == point
    on_disk = {p.name: _steps(p) for p in (run / "checkpoints").glob("*.ckpt")}  # each loads
    for name, steps in previous.items():
        if name != LAST or point == "written" or target != LAST:
            assert on_disk[name] == steps, (name, on_disk)  # what was there is there, whole
    resumed = resume_checkpoint(run)
    assert _steps(resumed) >= previous[LAST]


# -- the fsync of the file and of its folder --------------------------------------------------------------------------

@pytest.fixture
def fsynced(monkeypatch):
    """Every os.fsync of this process, as ('file' or 'folder', the path it flushed), in order."""
    calls = []
    real = os.fsync

    def recording(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        calls.append(("folder" if os.path.isdir(path) else "file", path))
        return real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    return calls


def test_write_atomically_flushes_the_temporary_file_before_the_rename_and_the_folder_after(tmp_path, fsynced,
                                                                                          monkeypatch):
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (renamed.append((len(fsynced), str(a))), real_replace(a, b)))
    files.write_atomically(tmp_path / "summary.json", lambda tmp: tmp.write_text("{}"))
    (at, tmp), = renamed
    assert fsynced[:at] == [("file", tmp)]  # the temporary file's bytes, before its rename
    assert fsynced[at:] == [("folder", str(tmp_path))]  # the rename itself, after
    assert (tmp_path / "summary.json").read_text() == "{}"


def test_link_atomically_flushes_the_folder_of_the_new_name(tmp_path, fsynced):
    (tmp_path / "checkpoint_000000000016.ckpt").write_bytes(b"weights")
    (tmp_path / "last").mkdir()
    files.link_atomically(tmp_path / "checkpoint_000000000016.ckpt", tmp_path / "last" / LAST)
    assert ("folder", str(tmp_path / "last")) == fsynced[-1]


def _flushed(calls) -> set:
    """('file', the final name of the flushed temporary file) and ('folder', the folder's name) of each fsync."""
    return {(kind, final_name(Path(p)) if kind == "file" and p.endswith(".tmp") else Path(p).name)
            for kind, p in calls}


@pytest.mark.slow
def test_a_run_flushes_its_checkpoints_config_summary_and_spaces_and_their_folders(tmp_path, fsynced):
    train(make_cfg(tmp_path, "hardware.num_workers=1", "train_for_env_steps=1000"))
    flushed = _flushed(fsynced)
    numbered = {name for kind, name in flushed if kind == "file" and name.startswith("checkpoint_")}
    assert numbered, flushed
    assert {("file", LAST), ("folder", "checkpoints"), ("file", "config.yaml"), ("file", "summary.json"),
            ("file", "spaces.json"), ("folder", "test")} <= flushed, flushed


@pytest.mark.slow
def test_an_export_flushes_the_file_its_description_and_their_folder(short_cartpole_run, tmp_path, fsynced):
    train_dir, _, _ = short_cartpole_run
    export(Policy.load(train_dir / "test"), "torchscript", tmp_path / "export" / "policy_0.pt")
    assert {("file", "policy_0.pt"), ("file", "policy_0.pt.json"), ("folder", "export")} <= _flushed(fsynced)
