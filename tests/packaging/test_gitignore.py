"""`pip install .` in the checkout leaves setuptools' `build/` (and `python -m build`'s `dist/`) there, and the docs'
own commands leave `site/` (`mkdocs build`) and `hub/` (the after-training guide's `local_dir=hub/<run>`): git
ignores them, so `git status` after README's install and the docs' commands shows nothing new."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_build_outputs_are_ignored():
    for path in ("build/lib/sf_hydra/__init__.py", "build/bdist.linux-x86_64/wheel", "dist/sf_hydra-0.1.tar.gz",
                 "site/index.html", "hub/cartpole/policy.pt"):
        check = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO)
        assert check.returncode == 0, f"{path} is not ignored by .gitignore"
