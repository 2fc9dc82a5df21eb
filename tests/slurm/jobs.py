"""Drives `python train.py --multirun hydra/launcher=slurm ...` as a user would, and looks
at its jobs through Slurm's own commands (squeue, sacct, scancel, scontrol)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, List, Optional

from tests.conftest import FAST_OVERRIDES, REPO_ROOT


def wait_until(condition: Callable[[], object], timeout: float, what: str, poll: float = 0.5):
    """Polls `condition` until it returns something true (returned), or fails naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def slurm(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, check=True, timeout=60).stdout


class SlurmSweep:
    """One sweep: its jobs carry a name of their own, so that squeue/sacct/scancel find them
    and only them; the sweep's folder is <tmp_path>/multirun/sweep."""

    def __init__(self, tmp_path: Path):
        self.train_dir = tmp_path
        self.dir = tmp_path / "multirun" / "sweep"
        self.job_name = f"sf_hydra_test_{uuid.uuid4().hex[:8]}"
        self.log_path = tmp_path / "sweep.log"
        self.proc: Optional[subprocess.Popen] = None

    def start(self, *overrides: str) -> None:
        cmd = [sys.executable, str(REPO_ROOT / "train.py"), "--multirun", "hydra/launcher=slurm",
               f"train_dir={self.train_dir}", "sweep_name=sweep", f"hydra.launcher.name={self.job_name}",
               *FAST_OVERRIDES, *overrides]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.train_dir, stdout=log, stderr=subprocess.STDOUT, text=True)

    def wait(self, timeout: float) -> int:
        """The sweep's exit code; a sweep still running after `timeout` fails the test."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the sweep still runs after {timeout:.0f} s:\n{self.output[-3000:]}") from None

    def run(self, *overrides: str, timeout: float) -> int:
        self.start(*overrides)
        return self.wait(timeout)

    @property
    def output(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def job_ids(self) -> List[str]:
        """The sweep's jobs still in the queue."""
        return slurm("squeue", "-h", f"--name={self.job_name}", "-o", "%i").split()

    def job_state(self, job_id: str) -> str:
        return slurm("squeue", "-h", "-j", job_id, "-o", "%T").strip()

    def history(self, job_id: str) -> List[str]:
        """Every state the job ended a run in, oldest first (a requeue adds a record)."""
        return slurm("sacct", "-D", "-X", "-n", "-P", "-j", job_id, "-o", "State").split()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        subprocess.run(["scancel", f"--name={self.job_name}"], capture_output=True, timeout=60)
