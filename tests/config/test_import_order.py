"""Imports point down: sf_hydra.config (schema, validation, store) imports nothing of ours
above it, so the layers above (envs, sampler, models) can import it without a cycle."""

import subprocess
import sys

from tests.conftest import REPO_ROOT

ABOVE_CONFIG = ("sf_hydra.envs", "sf_hydra.sampler", "sf_hydra.models", "sf_hydra.learner", "sf_hydra.core.targets")


def test_importing_config_imports_nothing_above_it():
    code = ("import sys\nimport sf_hydra.config\n"
            f"print(sorted(m for m in sys.modules if m.startswith({ABOVE_CONFIG!r})))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_registering_configs_imports_family_schemas_and_no_family_code():
    """register_configs finds each family's schema module on disk and imports those leaves (with
    the packages that hold them), never a family's code: vizdoom, ale_py, mujoco stay unloaded."""
    code = ("import sys\nfrom sf_hydra.config import register_configs\nregister_configs()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sf_hydra', 'vizdoom', 'ale_py', 'mujoco')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = set(result.stdout.strip()[2:-2].split("', '"))
    assert {"sf_hydra.envs.doom.schema", "sf_hydra.envs.atari.schema", "sf_hydra.envs.mujoco.schema"} <= loaded
    code = {m for m in loaded if m.startswith(("vizdoom", "ale_py", "mujoco", "sf_hydra.sampler", "sf_hydra.models"))}
    code |= {m for m in loaded if m.endswith(".family") and m != "sf_hydra.envs.family"}  # a family's code
    assert not code, code
