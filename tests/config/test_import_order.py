"""Every family's schema module imports on its own, first thing in a fresh interpreter: it
imports sf_hydra.config.schema, whose package registers every family's schema, so an eager
import there would find the family's module half-initialized (a circular import)."""

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

SCHEMAS = sorted(p.parent.name for p in (REPO_ROOT / "src" / "sf_hydra" / "envs").glob("*/schema.py"))


def test_every_family_with_a_schema_is_found():
    assert {"atari", "doom", "mujoco"} <= set(SCHEMAS)


@pytest.mark.parametrize("family", SCHEMAS)
def test_a_family_schema_imports_first(family):
    module = f"sf_hydra.envs.{family}.schema"
    code = f"import {module}\nfrom sf_hydra.config.store import env_schemas\nassert env_schemas()[{family!r}].__module__ == {module!r}"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
