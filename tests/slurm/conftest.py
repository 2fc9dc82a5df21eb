"""The tests in this folder submit real jobs to a real Slurm cluster (cluster/slurm/start.sh
starts a one-node one here). Without one they are skipped, saying why."""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Optional

import pytest

from tests.slurm.jobs import SlurmSweep

START = "cluster/slurm/start.sh"
PARTITION = "two_nodes"  # start.sh --two-nodes: nodes sfn1 and sfn2
NODES = {"sfn1": "10.87.0.2", "sfn2": "10.87.0.3"}  # cluster/slurm/netns.sh: each node's address on the bridge


def cluster_problem() -> Optional[str]:
    """Why no job could run here, or None when a node is up."""
    if shutil.which("sinfo") is None:
        return f"no Slurm here (sinfo not found); {START} installs and starts a one-node cluster"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return f"the Slurm cluster does not answer (sinfo timed out after 30 s); restart it with {START}"
    if out.returncode != 0:
        return f"the Slurm cluster is down (sinfo: {out.stderr.strip()[:300]}); start it with {START}"
    states = {s.rstrip("*~#!%$@^-") for s in out.stdout.split()}
    if not states & {"idle", "mixed", "allocated", "completing"}:
        return f"no Slurm node can run jobs (node states: {', '.join(sorted(states)) or 'none'}); see `sinfo -R`"
    return None


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    problem = cluster_problem()
    if problem:
        pytest.skip(problem)


@pytest.fixture
def sweep(slurm_cluster, tmp_path):
    """A sweep through `hydra/launcher=slurm` with its run folders in tmp_path; whatever
    the test leaves behind (the sweep process, its jobs) is stopped afterwards."""
    s = SlurmSweep(tmp_path)
    yield s
    s.stop()


@pytest.fixture
def two_nodes(slurm_cluster):
    """Skips unless both namespace nodes of `start.sh --two-nodes` are up: idle, or busy with another test's job
    (a job of this test then queues behind it). A node another test has taken down (test_slurm_node_loss, which
    brings it back) gets up to a minute to return."""
    up = {"idle", "mixed", "allocated", "completing"}
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(["sinfo", "-h", "-p", PARTITION, "-N", "-o", "%N %T"], capture_output=True, text=True,
                             timeout=30)
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        usable = {n for n, s in states.items() if s.rstrip("*~#!%$@^-") in up}
        if usable == set(NODES) or set(states) != set(NODES) or time.monotonic() > deadline:
            break
        time.sleep(2)
    if usable != set(NODES):
        pytest.skip(f"the two-node cluster is not up (partition {PARTITION}: {states or 'none'}); start it with "
                    f"{START} --two-nodes")
