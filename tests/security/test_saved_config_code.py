"""A saved config is data: it never calls code the user did not choose (sf_hydra.config.trust).

One CartPole run is trained; each case copies its folder and plants one hostile reference in the copy's
config.yaml: a `_target_` at a part's top, nested in a part's arguments or in a list, a path that walks through an
allowed module's imports to other code, an env id that imports a module, a resolver that reads the environment, a
forged trust record. The copy is then loaded every way a user loads a run: `Policy.load`, enjoy, `sf-export`
and a resume of the run. Each refuses before anything is imported or called: the marker file the hostile code
would write never appears, and the refusal is one ConfigError naming the key. The user's own runs (their own
env and encoder, sealed by their training) load with no flag; another user's copy of them needs trusted_targets.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from sf_hydra.app import export_command
from sf_hydra.app.checks import check_command_line
from sf_hydra.app.enjoy import enjoy
from sf_hydra.app.train import train
from sf_hydra.config import ConfigError
from sf_hydra.config.schema import EnjoyConfig
from sf_hydra.config.trust import TRUST_FILE, TRUSTED_ENV, check_saved_config
from sf_hydra.evaluation.policy import Policy
from tests.conftest import CONF_DIR, FAST_OVERRIDES, REPO_ROOT, make_cfg
from tests.faults.runs import env_with_repo

EXAMPLE_CONF = REPO_ROOT / "examples" / "custom_env" / "conf"


class Unpickled:
    """A pickle that creates `marker` when it is loaded: what numpy.load(allow_pickle) or torch.load would run."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def path_node(marker: Path) -> dict:
    return {"_target_": "pathlib.Path", "_args_": [str(marker)]}


def hostile_pickle(folder: Path, marker: Path) -> str:
    path = folder / "weights.npy"
    path.write_bytes(pickle.dumps(Unpickled(marker)))
    return str(path)


# (case id, the key the refusal names, how the config is changed: (config, run folder, marker) -> None)
CASES = [
    ("encoder write_text", "model.encoder._target_", lambda c, d, m: c["model"].__setitem__(
        "encoder", {"_target_": "pathlib.Path.write_text", "_args_": [path_node(m), "x"]})),
    ("encoder arg nested", "model.encoder.layers._target_", lambda c, d, m: c["model"]["encoder"].__setitem__(
        "layers", {"_target_": "builtins.open", "_args_": [str(m), "w"]})),
    ("encoder arg in a list", "model.encoder.extra.0._target_", lambda c, d, m: c["model"]["encoder"].__setitem__(
        "extra", [{"_target_": "builtins.open", "_args_": [str(m), "w"]}])),
    ("network copyfile", "model._target_", lambda c, d, m: c["model"].__setitem__("_target_", "shutil.copyfile")
        or c["model"].__setitem__("_args_", [str(d / "spaces.json"), str(m)])),
    ("core numpy.load", "model.core._target_", lambda c, d, m: c["model"].__setitem__(
        "core", {"_target_": "numpy.load", "_args_": [hostile_pickle(d, m)], "allow_pickle": True})),
    ("head through models' torch", "model.action_head._target_", lambda c, d, m: c["model"].__setitem__(
        "action_head", {"_target_": "sf_hydra.models.actor_critic.torch.load", "_args_": [hostile_pickle(d, m)],
                        "weights_only": False})),
    ("head a models function of another module", "model.action_head._target_", lambda c, d, m: c["model"].__setitem__(
        "action_head", {"_target_": "sf_hydra.models.encoders.build", "_args_": ["x", path_node(m)]})),
    ("family FileHandler", "env.factory._target_", lambda c, d, m: c["env"].__setitem__(
        "factory", {"_target_": "logging.FileHandler", "_args_": [str(m)]})),
    ("family arg nested", "env.factory.extra._target_", lambda c, d, m: c["env"]["factory"].__setitem__(
        "extra", {"_target_": "builtins.open", "_args_": [str(m), "w"]})),
    ("family through envs' subprocess", "env.factory._target_", lambda c, d, m: c["env"].__setitem__(
        "factory", {"_target_": "sf_hydra.envs.doom.players.subprocess.Popen", "_args_": [["touch", str(m)]]})),
    ("family a function of sf_hydra.envs", "env.factory._target_", lambda c, d, m: c["env"].__setitem__(
        "factory", {"_target_": "sf_hydra.envs.doom.maps.build.write_atomically",
                    "_args_": [str(m), {"_target_": "pathlib.Path.touch", "_partial_": True}]})),
    ("env id imports a module", "env.id", lambda c, d, m: c["env"].__setitem__("id", "hostile_module:CartPole-v1")),
    ("optimizer torch.load", "algo.optimizer._target_", lambda c, d, m: c["algo"].__setitem__(
        "optimizer", {"_target_": "torch.load", "_args_": [hostile_pickle(d, m)], "weights_only": False})),
    ("optimizer through optim's torch", "algo.optimizer._target_", lambda c, d, m: c["algo"].__setitem__(
        "optimizer", {"_target_": "torch.optim.adam.torch.load", "_args_": [hostile_pickle(d, m)],
                      "weights_only": False})),
    ("optimizer arg nested", "algo.optimizer.params._target_", lambda c, d, m: c["algo"]["optimizer"].__setitem__(
        "params", {"_target_": "builtins.open", "_args_": [str(m), "w"]})),
    ("trainer exec", "trainer._target_", lambda c, d, m: c["trainer"].__setitem__("_target_", "builtins.exec")
        or c["trainer"].__setitem__("_args_", [f"open({str(m)!r}, 'w')"])),
    ("callback FileHandler", "callbacks.evil._target_", lambda c, d, m: c["callbacks"].__setitem__(
        "evil", {"_target_": "logging.FileHandler", "_args_": [str(m)]})),
    ("callback arg nested", "callbacks.summaries.sink._target_", lambda c, d, m: c["callbacks"]["summaries"]
        .__setitem__("sink", {"_target_": "logging.FileHandler", "_args_": [str(m)]})),
    ("callback a project class not shipped as one", "callbacks.evil._target_", lambda c, d, m: c["callbacks"]
        .__setitem__("evil", {"_target_": "sf_hydra.core.run_dir.RunLock", "_args_": [str(m)]})),
    ("logger FileHandler", "logger.extra.evil._target_", lambda c, d, m: c["logger"].setdefault("extra", {})
        .__setitem__("evil", {"_target_": "logging.FileHandler", "_args_": [str(m)]})),
    ("a target at the root", "_target_", lambda c, d, m: c.__setitem__("_target_", "builtins.exec")),
    ("a target where nothing is built", "eval.hook._target_", lambda c, d, m: c["eval"].__setitem__(
        "hook", {"_target_": "builtins.open", "_args_": [str(m), "w"]})),
    ("a resolver reading the environment", "logger.project", lambda c, d, m: c["logger"].__setitem__(
        "project", "${oc.env:SF_TEST_SECRET}")),
    ("a forged trust record", "callbacks.evil._target_", lambda c, d, m: c["callbacks"].__setitem__(
        "evil", {"_target_": "logging.FileHandler", "_args_": [str(m)]}) or (d / TRUST_FILE).write_text(
        '{"references": ["target:logging.FileHandler"], "seal": "' + "0" * 64 + '"}')),
]


@pytest.fixture(scope="module")
def trained(short_cartpole_run):
    """The session's short CartPole run (tests/conftest.py); each case copies it, never changes it."""
    return short_cartpole_run[0] / "test"


def hostile_copy(trained: Path, tmp_path: Path, change) -> tuple:
    """(train_dir, run folder, marker): a copy of the trained run whose config `change` altered."""
    run = tmp_path / "train_dir" / "test"
    shutil.copytree(trained, run)
    marker = tmp_path / "MARKER"
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    change(cfg, run, marker)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "hostile_module.py").write_text(f"open({str(marker)!r}, 'w')\n")  # what `env.id` would import
    return run.parent, run, marker


@pytest.fixture
def in_hostile_cwd(tmp_path, monkeypatch):
    """The test runs in tmp_path, where hostile_module.py would be importable (as a user's project folder is)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SF_TEST_SECRET", "hunter2")
    return tmp_path


def refuses(call, key: str) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        call()
    assert refused.value.key == key, refused.value
    assert "trusted_targets=" in refused.value.allowed and "\n" not in str(refused.value)
    return refused.value


def enjoy_cfg(train_dir: Path, **keys):
    cfg = OmegaConf.structured(EnjoyConfig)
    cfg.train_dir, cfg.experiment, cfg.run_dir, cfg.episodes = str(train_dir), "test", str(train_dir / "test"), 1
    for key, value in keys.items():
        cfg[key] = value
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize("case,key,change", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_saved_config_is_refused_everywhere_before_any_call(trained, tmp_path, in_hostile_cwd, caplog,
                                                                    case, key, change):
    train_dir, run, marker = hostile_copy(trained, tmp_path, change)
    refuses(lambda: Policy.load(run), key)
    refuses(lambda: enjoy(enjoy_cfg(train_dir)), key)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="sf_hydra"):
        assert export_command.main([f"run_dir={run}", "format=torchscript"]) == 2
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        m for m in [r.getMessage() for r in caplog.records] if m.startswith(f"bad config: {key}=")]
    assert len(caplog.records) >= 1
    resume = [f"train_dir={train_dir}", "experiment=test", *FAST_OVERRIDES, "train_for_env_steps=6000"]
    try:
        refuses(lambda: check_command_line(resume, str(CONF_DIR)), key)
    finally:
        GlobalHydra.instance().clear()
    assert not marker.exists(), f"{case}: the hostile code ran"
    assert "hostile_module" not in sys.modules


@pytest.fixture(scope="module")
def pushed(trained, tmp_path_factory):
    """The trained run as a repo in a folder (sf-push local_dir=), which each case then tampers with."""
    pytest.importorskip("safetensors", reason="the hub extra (safetensors, huggingface_hub) is not installed")
    pytest.importorskip("huggingface_hub", reason="the hub extra (safetensors, huggingface_hub) is not installed")
    from sf_hydra.app.hub import push_main

    out = tmp_path_factory.mktemp("pushed") / "repo"
    assert push_main([f"run_dir={trained}", f"local_dir={out}"]) == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case,key,change", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_repo_is_refused_at_pull_before_it_lands(pushed, tmp_path, in_hostile_cwd, caplog, case, key,
                                                           change):
    from sf_hydra.app.hub import pull_main

    repo = tmp_path / "repo"
    shutil.copytree(pushed, repo)
    marker = tmp_path / "MARKER"
    cfg = yaml.safe_load((repo / "config.yaml").read_text())
    change(cfg, repo, marker)
    (repo / "config.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "hostile_module.py").write_text(f"open({str(marker)!r}, 'w')\n")
    with caplog.at_level(logging.ERROR, logger="sf_hydra"):
        assert pull_main([f"local_dir={repo}", f"train_dir={tmp_path / 'pulled'}", "experiment=run"]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(f"bad config: {key}="), errors
    assert not (tmp_path / "pulled" / "run").exists(), "a refused pull landed"
    assert not marker.exists(), f"{case}: the hostile code ran"


@pytest.mark.slow
def test_what_the_user_trusts_loads(trained, tmp_path, in_hostile_cwd, monkeypatch):
    """trusted_targets (the call's, or the environment's) opens exactly what it names, a module prefix or a path,
    and nothing that a trusted module merely imports."""
    def encoder(c, d, m):
        c["model"]["encoder"]["_target_"] = "tests.helpers.trusted_parts.WrappedEncoder"
    _, run, _ = hostile_copy(trained, tmp_path, encoder)
    refuses(lambda: Policy.load(run), "model.encoder._target_")
    assert Policy.load(run, trusted_targets=["tests.helpers.trusted_parts"]).act(np.zeros(4, np.float32))[0] in (0, 1)
    monkeypatch.setenv(TRUSTED_ENV, "tests.helpers.trusted_parts.WrappedEncoder")
    assert Policy.load(run) is not None
    # a trusted prefix does not open what its modules import: trusted_parts imports builtins' open as `opener`
    saved = OmegaConf.create({"model": {"encoder": {"_target_": "tests.helpers.trusted_parts.opener"}}})
    with pytest.raises(ConfigError):
        check_saved_config(saved, "config.yaml", ["tests.helpers.trusted_parts"])
    with pytest.raises(ConfigError, match="trusted_targets"):
        check_saved_config(saved, "config.yaml", ["not a path"])


@pytest.mark.slow
def test_the_users_own_custom_run_loads_with_no_flag_and_a_copy_elsewhere_needs_one(tmp_path, monkeypatch):
    """A run trained with the user's own env family and encoder (examples/custom_env) plays with no flag: its
    training sealed what its config names with the user's key. The same folder under another user's key (a copy
    from elsewhere) is refused until trusted."""
    monkeypatch.chdir(REPO_ROOT)  # the example's modules import from the repository root, as its README runs it
    train(make_cfg(tmp_path, "env=custom/catch", f"hydra.searchpath=[file://{EXAMPLE_CONF}]",
                   "hardware.num_workers=1", "hardware.num_envs_per_worker=4", "train_for_env_steps=600"))
    GlobalHydra.instance().clear()
    run = tmp_path / "test"
    assert "examples.custom_env" in (run / TRUST_FILE).read_text()
    assert Policy.load(run).origin.env_steps >= 600
    monkeypatch.setenv("SF_HYDRA_HOME", str(tmp_path / "another_user"))
    refused = refuses(lambda: Policy.load(run), "env.factory._target_")
    assert refused.value == "examples.custom_env.catch_env.CatchFamily"
    assert Policy.load(run, trusted_targets=["examples.custom_env"]).origin.env_steps >= 600


@pytest.mark.slow
@pytest.mark.parametrize("command", ["enjoy", "export", "resume"])
def test_the_commands_refuse_in_one_line_with_exit_2(trained, tmp_path, command):
    """As a user runs them: exit status 2, one `bad config:` line naming the key, no traceback, no marker."""
    train_dir, run, marker = hostile_copy(trained, tmp_path, CASES[0][2])
    argv = {"enjoy": [str(REPO_ROOT / "enjoy.py"), f"train_dir={train_dir}", "experiment=test", "episodes=1"],
            "export": ["-m", "sf_hydra.app.export_command", f"run_dir={run}", "format=torchscript"],
            "resume": [str(REPO_ROOT / "train.py"), f"train_dir={train_dir}", "experiment=test", *FAST_OVERRIDES,
                       "train_for_env_steps=6000"]}[command]
    done = subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**env_with_repo(), "SF_HYDRA_HOME": os.environ["SF_HYDRA_HOME"]})
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-2000:]
    lines = [line for line in out.splitlines() if "bad config:" in line]
    assert len(lines) == 1 and "model.encoder._target_='pathlib.Path.write_text'" in lines[0], out[-2000:]
    assert "Traceback" not in out
    assert not marker.exists()
