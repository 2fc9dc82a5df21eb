"""torchrun on one machine (`torchrun --nproc-per-node=2 train.py ...`) is refused by every worker it starts, in one
line naming torchrun's variable, before any run folder is locked or made: torchrun's workers are one process per
rank, each of which would take the run folder, while here one process starts its machine's ranks itself."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.faults.runs import REPO, TINY, env_with_repo


@pytest.mark.slow
@pytest.mark.parametrize("devices", [[], ["hardware.devices=2"]], ids=["one rank asked", "two ranks asked"])
def test_torchrun_workers_are_refused_before_the_run_folder_is_touched(tmp_path, devices):
    torchrun = shutil.which("torchrun") or pytest.skip("torchrun (torch's launcher) is not on PATH")
    cmd = [torchrun, "--standalone", "--nproc-per-node=2", str(REPO / "train.py"),  # --standalone: a free port
           f"train_dir={tmp_path}", "experiment=run", *TINY, *devices]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env_with_repo())
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    refusals = [line for line in out.splitlines() if line.startswith("bad config: TORCHELASTIC_RUN_ID=")]
    # each worker refuses; torchrun may stop the second before it has said so, once the first failed
    assert refusals and "started by torchrun" in refusals[0] and "exitcode: 2" in out, out[-3000:]
    assert "in use by a live run" not in out
    assert not (tmp_path / "run").exists(), sorted(p.name for p in tmp_path.iterdir())
