"""Runs train.py as on a plain install without the `slurm` extra: `python -m tests.helpers.without_slurm ARGS`.
submitit and hydra-submitit-launcher are installed in the test environment, so they are hidden from the
import system (tests/helpers/hide_modules.py) before train.py starts."""

import sys
from pathlib import Path

from tests.helpers.hide_modules import run_without

HIDDEN = ("submitit", "hydra_plugins.hydra_submitit_launcher")

if __name__ == "__main__":
    run_without(HIDDEN, str(Path(__file__).resolve().parents[2] / "train.py"), sys.argv[1:])
