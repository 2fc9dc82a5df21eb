"""Sample Factory experiment folders from elsewhere are data (issue 52): a tampered folder is refused by sf-import-run
and by sf-pull (which imports a Sample Factory Hub repo the same way) before it lands, in one framed line, and no
code it carries runs: a hostile pickle in its checkpoint, an interpolation reading this machine's environment in its
config.json, an env or value the import table does not know, a symbolic link."""

from __future__ import annotations

import json
import logging
import pickle
import shutil
from pathlib import Path

import pytest

from sf_hydra.app.import_sf_run import main as import_main
from tests.conftest import REPO_ROOT

SF_CARTPOLE = REPO_ROOT / "tests" / "data" / "sample_factory" / "cartpole_mlp"


class Unpickled:
    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def hostile_checkpoint(folder: Path, marker: Path) -> None:
    for path in (folder / "checkpoint_p0").glob("*.pth"):
        path.write_bytes(pickle.dumps({"model": Unpickled(marker), "env_steps": 1}))


def config_value(key, value):
    def change(folder: Path, marker: Path) -> None:
        cfg = json.loads((folder / "config.json").read_text())
        cfg[key] = value
        (folder / "config.json").write_text(json.dumps(cfg))
    return change


def linked(folder: Path, marker: Path) -> None:
    (folder / "notes.txt").symlink_to(Path.home() / ".bashrc")


CASES = {
    "a pickle in the checkpoint": (hostile_checkpoint, "checkpoint"),
    "an environment read in config.json": (config_value("wandb_project", "${oc.env:SF_TEST_SECRET}"),
                                           "config.json: wandb_project"),
    "an env that names a module": (config_value("env", "hostile_module:CartPole-v1"), "env"),
    "a flag of no known kind": (config_value("encoder_custom", "hostile_module.Encoder"), "config.json"),
    "a symbolic link": (linked, "source"),
}


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SF_TEST_SECRET", "hunter2")
    marker = tmp_path / "MARKER"
    (tmp_path / "hostile_module.py").write_text(f"open({str(marker)!r}, 'w')\n")
    return marker


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_tampered_sample_factory_folder_is_refused_by_the_import(tmp_path, hostile, caplog, case):
    change, key = CASES[case]
    source = tmp_path / "sf_run"
    shutil.copytree(SF_CARTPOLE, source)
    change(source, hostile)
    with caplog.at_level(logging.ERROR, logger="sf_hydra"):
        code = import_main([str(source), "experiment=imported", f"train_dir={tmp_path / 'train_dir'}"])
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert code == 2, errors
    assert len(errors) == 1 and errors[0].startswith(f"bad config: {key}"), errors
    assert "hunter2" not in errors[0]
    assert not (tmp_path / "train_dir" / "imported").exists(), "a refused import landed"
    assert not hostile.exists(), f"{case}: the hostile code ran"


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_tampered_sample_factory_repo_is_refused_by_the_pull(tmp_path, hostile, caplog, case):
    pytest.importorskip("huggingface_hub", reason="sf-pull needs the hub extra (huggingface_hub)")
    pytest.importorskip("safetensors", reason="sf-pull needs the hub extra (safetensors)")
    from sf_hydra.app.hub import pull_main

    change, key = CASES[case]
    repo = tmp_path / "sf_repo"
    shutil.copytree(SF_CARTPOLE, repo)
    change(repo, hostile)
    with caplog.at_level(logging.ERROR, logger="sf_hydra"):
        code = pull_main([f"local_dir={repo}", f"train_dir={tmp_path / 'train_dir'}", "experiment=pulled"])
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert code == 2 and len(errors) == 1, errors
    assert not (tmp_path / "train_dir" / "pulled").exists(), "a refused pull landed"
    assert not hostile.exists(), f"{case}: the hostile code ran"
