"""Secrets stay home (issue 52, item 7): a value the user hands over in an environment variable
(`${oc.env:TOKEN}` on the command line) is saved in config.yaml as its interpolation, never in clear, stays so
when the run resumes (which resolves it again), and `sf-push` leaves out the overrides that read the environment
(of .hydra/overrides.yaml and of the model card's command lines) and says so: the token is in no file of the
run's config nor of the pushed folder."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.faults.runs import env_with_repo, train_py

pytest.importorskip("huggingface_hub", reason="sf-push needs the hub extra (huggingface_hub)")
pytest.importorskip("safetensors", reason="sf-push needs the hub extra (safetensors)")

TOKEN = "hf_FAKEtoken0123456789abcdefSECRET"
FROM_ENV = ("logger.wandb_user=${oc.env:SF_TEST_TOKEN}", "logger.wandb_group=team-${logger.wandb_user}")


def _files_with(folder: Path, text: str) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and text.encode() in
                  p.read_bytes())


@pytest.mark.slow
def test_a_token_from_the_environment_is_never_saved_nor_pushed(tmp_path, monkeypatch):
    monkeypatch.setenv("SF_TEST_TOKEN", TOKEN)
    first = train_py(tmp_path, *FROM_ENV)
    assert first.returncode == 0, first.out[-3000:]
    run_dir = tmp_path / "run"
    config = (run_dir / "config.yaml").read_text()
    assert TOKEN not in config
    assert "wandb_user: ${oc.env:SF_TEST_TOKEN}" in config and "wandb_group: team-${logger.wandb_user}" in config

    resumed = train_py(tmp_path, "train_for_env_steps=3000")  # the saved interpolations resolve again
    assert resumed.returncode == 0 and "resuming from" in resumed.out, resumed.out[-3000:]
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["sf_hydra"]["env_steps"] >= 3000
    assert _files_with(run_dir, TOKEN) == []  # nor in the log, the TensorBoard files, .hydra/
    assert "${oc.env:SF_TEST_TOKEN}" in (run_dir / "config.yaml").read_text()

    train_py(tmp_path, *FROM_ENV, "train_for_env_steps=4000")  # a session that typed them: its overrides.yaml
    out = tmp_path / "pushed"
    push = subprocess.run([sys.executable, "-m", "sf_hydra.app.hub", "push", f"train_dir={tmp_path}",
                           "experiment=run", "repo=me/run", f"local_dir={out}"], capture_output=True, text=True,
                          timeout=180, env=env_with_repo(), cwd=tmp_path)
    assert push.returncode == 0, push.stderr[-3000:]
    assert _files_with(out, TOKEN) == [] and _files_with(out, "oc.env:SF_TEST_TOKEN") == ["config.yaml"]
    overrides = (out / ".hydra" / "overrides.yaml").read_text()
    assert "oc.env" not in overrides and "train_for_env_steps=4000" in overrides
    assert FROM_ENV[1] in overrides  # an interpolation of another key: no value, the puller's own resolves it
    card = (out / "README.md").read_text()
    assert "oc.env" not in card and "Left out of these command lines: 1 override(s)" in card
    said = [line for line in push.stderr.splitlines() if "not pushed" in line]
    assert len(said) == 1 and FROM_ENV[0] in said[0], push.stderr[-3000:]
    assert "kept unresolved in config.yaml: logger.wandb_user" in said[0]

    monkeypatch.delenv("SF_TEST_TOKEN")  # a new shell without the token: the resume says which value needs it
    unset = train_py(tmp_path, "train_for_env_steps=5000")
    assert unset.returncode == 2 and "Traceback" not in unset.out, unset.out[-3000:]
    said = [line for line in unset.out.splitlines() if "bad config:" in line]
    assert len(said) == 1 and "logger.wandb_user='${oc.env:SF_TEST_TOKEN}'" in said[0], unset.out[-3000:]
