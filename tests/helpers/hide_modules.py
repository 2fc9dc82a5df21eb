"""Runs a script as on an install that lacks some packages: `python -m tests.helpers.hide_modules MOD[,MOD...]
SCRIPT ARGS`. The packages stay installed; a meta-path finder reports them (and their submodules) missing."""

import importlib.abc
import runpy
import sys
from typing import Sequence


class HideModules(importlib.abc.MetaPathFinder):
    def __init__(self, hidden: Sequence[str]):
        self.hidden = tuple(hidden)

    def find_spec(self, name, path=None, target=None):
        if any(name == h or name.startswith(h + ".") for h in self.hidden):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def run_without(hidden: Sequence[str], script: str, args: Sequence[str]) -> None:
    sys.meta_path.insert(0, HideModules(hidden))
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    run_without(sys.argv[1].split(","), sys.argv[2], sys.argv[3:])
