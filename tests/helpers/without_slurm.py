"""Runs train.py as on a plain install without the `slurm` extra: `python -m tests.helpers.without_slurm ARGS`.
submitit and hydra-submitit-launcher are installed in the test environment, so this hides them from the
import system (a meta-path finder that reports them missing) before train.py starts."""

import importlib.abc
import runpy
import sys
from pathlib import Path

HIDDEN = ("submitit", "hydra_plugins.hydra_submitit_launcher")


class HideSlurmExtra(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == h or name.startswith(h + ".") for h in HIDDEN):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, HideSlurmExtra())
    train_py = Path(__file__).resolve().parents[2] / "train.py"
    sys.argv = [str(train_py), *sys.argv[1:]]
    runpy.run_path(str(train_py), run_name="__main__")
