"""`pip install .` (not editable): a wheel built from this checkout, installed in a fresh venv, trains
CartPole with `sf-train` from an empty folder, its configs and presets read from the installed package
(pkg://sf_hydra_conf), and a user's own configs join through `hydra.searchpath`.

The wheel is built by pip (isolated build, as `pip install .` does) from a copy of the checkout's
packaged files, so nothing is written into the checkout. Two venvs:

- `deps_from_here` (default selection, ~1 minute): a venv without pip's site packages whose only view
  of the dependencies (torch, hydra, ...) is a `.pth` line naming this interpreter's site-packages
  folders. A `.pth` line adds a folder to sys.path but does not run the `.pth` files inside it, so an
  editable install of sf_hydra there (CI's) stays invisible: sf_hydra, its plugins and its configs can
  come only from the wheel, and the test checks that they do.
- `isolated` (long: installs torch and every dependency from the index, a few more minutes): the
  wheel with its own dependencies resolved by pip, as a user's `pip install sf_hydra` would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGED = ("pyproject.toml", "README.md", "src", "conf", "experiments")  # what a wheel is built from
TINY = ("hardware.num_workers=1", "hardware.num_envs_per_worker=2", "algo.rollout=16", "algo.batch_size=32",
        "algo.num_batches_per_epoch=1", "logger.log_interval_sec=1")

pytestmark = pytest.mark.slow


def _run(cmd, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout[-4000:]}"
    return proc


def clean_env() -> dict:
    """The environment of a user's shell: no PYTHONPATH (a test run may put the checkout on it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("checkout_copy")
    for name in PACKAGED:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("wheels")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, src], cwd=out, env=clean_env())
    wheels = list(out.glob("sf_hydra-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


@pytest.fixture(scope="module", params=["deps_from_here", pytest.param("isolated", marks=pytest.mark.long)])
def venv(request, wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp(f"venv_{request.param}")
    if request.param == "deps_from_here":
        _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=venv, env=clean_env())
        here = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
        (_site_packages(venv) / "_deps_from_test_env.pth").write_text("\n".join(here) + "\n")
        _run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-deps",
              "--ignore-installed", wheel], cwd=venv, env=clean_env())
    else:
        _run([sys.executable, "-m", "venv", venv], cwd=venv, env=clean_env())
        pip = [venv / "bin" / "python", "-m", "pip", "install", "-q"]
        _run([*pip, "torch==2.13.0"], cwd=venv, env=clean_env(), timeout=1200)  # the CPU build first (.ci/run)
        _run([*pip, wheel], cwd=venv, env=clean_env(), timeout=1200)
    return venv


def test_installed_package_is_the_wheel(venv, tmp_path):
    """sf_hydra, its Hydra plugins and its configs are imported from the venv, not from this checkout."""
    code = ("import json, sf_hydra, sf_hydra_conf, hydra_plugins.sf_hydra_plugins as p, sf_hydra.app.cli as c;"
            "print(json.dumps([sf_hydra.__file__, sf_hydra_conf.__file__, p.__file__, c.CONFIG_PATH, c.CONFIG_DIR]))")
    out = _run([venv / "bin" / "python", "-c", code], cwd=tmp_path, env=clean_env()).stdout
    code_file, conf_file, plugin_file, config_path, config_dir = json.loads(out.strip().splitlines()[-1])
    site = _site_packages(venv).resolve()
    for path in (code_file, conf_file, plugin_file, config_dir):
        assert Path(path).resolve().is_relative_to(site), f"{path} is not from the installed wheel ({site})"
    assert config_path == "pkg://sf_hydra_conf"
    for preset in ("cartpole_seeds", "doom_basic_envs"):  # experiments/ ships as conf's experiments group
        assert (Path(config_dir) / "experiments" / f"{preset}.yaml").is_file()


def test_sf_train_from_an_empty_folder_with_own_configs(venv, tmp_path):
    """`sf-train` in an empty project folder: the run lands in ./train_dir; the project's own preset and
    env config (in ./conf, added with hydra.searchpath) compose with the packaged ones."""
    project = tmp_path / "project"
    (project / "conf" / "experiments").mkdir(parents=True)
    (project / "conf" / "env" / "mine").mkdir(parents=True)
    (project / "conf" / "experiments" / "quick_pole.yaml").write_text(
        "# @package _global_\n# A project's own preset: a short CartPole run.\n"
        "train_for_env_steps: 2000\nexperiment: quick_pole\n")
    (project / "conf" / "env" / "mine" / "pole.yaml").write_text(
        "# A project's own env config, built on the packaged one.\ndefaults:\n  - gym/cartpole\n  - _self_\n"
        "name: my_pole\n")
    proc = _run([venv / "bin" / "sf-train", "hydra.searchpath=[file://conf]", "+experiment=quick_pole", "env=mine/pole",
                 *TINY], cwd=project, env=clean_env())
    run = project / "train_dir" / "quick_pole"
    assert list((run / "checkpoints").glob("*.ckpt")), proc.stdout[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= 2000, summary
    assert "name: my_pole" in (run / "config.yaml").read_text()
    assert sorted(p.name for p in project.iterdir()) == ["conf", "train_dir"]  # nothing else written here

    # sf-enjoy plays that run from the same folder; sf-report reads the folder of runs.
    _run([venv / "bin" / "sf-enjoy", "experiment=quick_pole", "episodes=1"], cwd=project, env=clean_env())
    assert json.loads((run / "enjoy" / "eval.json").read_text())
    report = _run([venv / "bin" / "sf-report", "train_dir", "--out", "curves.png"], cwd=project, env=clean_env())
    assert (project / "curves.png").stat().st_size > 0, report.stdout


def test_sf_train_help_and_a_packaged_preset(venv, tmp_path):
    """`--help` reads the packaged schema docs; a packaged preset composes (from a folder with no conf/)."""
    text = _run([venv / "bin" / "sf-train", "--help", "algo.gamma"], cwd=tmp_path, env=clean_env()).stdout
    assert "algo.gamma=" in text and "discount" in text.lower(), text
    text = _run([venv / "bin" / "sf-enjoy", "--help"], cwd=tmp_path, env=clean_env()).stdout
    assert "sf-enjoy experiment=<name>" in text and "powered by Hydra" not in text, text
    assert "usage: sf-report" in _run([venv / "bin" / "sf-report", "--help"], cwd=tmp_path, env=clean_env()).stdout
    job = _run([venv / "bin" / "sf-train", "+experiment=cartpole_seeds", "--cfg", "job"], cwd=tmp_path,
               env=clean_env()).stdout
    assert "cartpole" in job, job[-2000:]
    assert list(tmp_path.iterdir()) == []


def _has(venv: Path, *modules: str) -> bool:
    """Whether the venv's Python imports every one of `modules` (its own packages or, deps_from_here, this one's)."""
    code = "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]"
    return subprocess.run([venv / "bin" / "python", "-c", code, *modules], env=clean_env(),
                          capture_output=True).returncode == 0


def test_after_training_commands_from_an_empty_folder(venv, tmp_path):
    """After a run trained with the wheel: `sf_hydra.Policy` acts from plain Python, `sf-export` writes an ONNX file
    that onnxruntime runs to the Policy's deterministic actions, `sf-push local_dir=` writes a Hub repo and
    `sf-pull local_dir=` lays it out as a run that `sf-enjoy` plays; all from a folder holding nothing else."""
    for modules, extra in ((("onnx", "onnxruntime"), "export"), (("huggingface_hub", "safetensors"), "hub")):
        if not _has(venv, *modules):
            pytest.skip(f"the after-training commands need the {extra} extra ({', '.join(modules)})")
    project = tmp_path / "project"
    project.mkdir()
    _run([venv / "bin" / "sf-train", "env=gym/cartpole", "experiment=pole", "train_for_env_steps=2000", *TINY],
         cwd=project, env=clean_env())

    # Policy: the deterministic actions of 64 observations, saved for the ONNX comparison below.
    act = ("import json, numpy as np; from sf_hydra import Policy;"
           "p = Policy.load('train_dir/pole'); obs = np.random.default_rng(0).normal(size=(64, 4)).astype('float32');"
           "np.save('obs.npy', obs); a, _ = p.act(obs, deterministic=True); print(json.dumps(np.asarray(a).tolist()))")
    out = _run([venv / "bin" / "python", "-c", act], cwd=project, env=clean_env()).stdout
    actions = json.loads(out.splitlines()[-1])
    assert len(actions) == 64 and set(actions) <= {0, 1}, actions

    _run([venv / "bin" / "sf-export", "experiment=pole", "format=onnx"], cwd=project, env=clean_env())
    model = project / "train_dir" / "pole" / "export" / "policy_0.onnx"
    spec = json.loads(model.with_name(model.name + ".json").read_text())
    assert [i["name"] for i in spec["inputs"]] == ["obs"] and "action" in spec["outputs"], spec
    run = ("import json, sys, numpy as np, onnxruntime as ort; s = ort.InferenceSession(sys.argv[1]);"
           "out = dict(zip([o.name for o in s.get_outputs()], s.run(None, {'obs': np.load('obs.npy')})));"
           "print(json.dumps(np.asarray(out['action']).tolist()))")
    exported = _run([venv / "bin" / "python", "-c", run, model], cwd=project, env=clean_env()).stdout.splitlines()[-1]
    assert json.loads(exported) == actions

    _run([venv / "bin" / "sf-push", "experiment=pole", "repo=someone/pole", "local_dir=hub_repo"], cwd=project,
         env=clean_env())
    assert (project / "hub_repo" / "README.md").is_file()
    _run([venv / "bin" / "sf-pull", "local_dir=hub_repo", "experiment=pulled"], cwd=project, env=clean_env())
    _run([venv / "bin" / "sf-enjoy", "experiment=pulled", "episodes=1"], cwd=project, env=clean_env())
    assert json.loads((project / "train_dir" / "pulled" / "enjoy" / "eval.json").read_text())
    # (hidden: `.hub_repo.lock`, the lock the push swaps its folder in under, kept as lock files are)
    assert sorted(p.name for p in project.iterdir() if not p.name.startswith(".")) == ["hub_repo", "obs.npy",
                                                                                        "train_dir"]


def test_sf_import_run_from_an_empty_folder(venv, tmp_path):
    """`sf-import-run` from the wheel: a run Sample Factory 2.1.1 made (the test fixture, copied into an empty
    folder) becomes ./train_dir/<name>, which `sf-enjoy` plays."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "tests" / "data" / "sample_factory" / "cartpole_mlp", project / "sf_runs" / "cartpole")
    _run([venv / "bin" / "sf-import-run", "sf_runs/cartpole", "experiment=cartpole_sf"], cwd=project, env=clean_env())
    run = project / "train_dir" / "cartpole_sf"
    assert (run / "checkpoints" / "last.ckpt").is_file() and (run / "config.yaml").is_file()
    _run([venv / "bin" / "sf-enjoy", "experiment=cartpole_sf", "episodes=1"], cwd=project, env=clean_env())
    assert json.loads((run / "enjoy" / "eval.json").read_text())["episodes"]
    assert sorted(p.name for p in project.iterdir()) == ["sf_runs", "train_dir"]
