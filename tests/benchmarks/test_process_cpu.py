"""benchmarks/_common.run_tree's CPU split: what the tree's processes that run no Python (env engines such as
ViZDoom's) spend is counted apart from the Python processes, the command's own process included."""

import sys

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
from _common import run_tree  # noqa: E402

# A Python parent that waits while a shell child (no Python) counts to 2,000,000: ~2 s of CPU here (0.7 s for
# 600,000 left too thin a margin over the 0.5 s bar on a faster machine).
PARENT = "import subprocess; subprocess.run(['sh', '-c', 'i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done'])"


def test_a_child_that_runs_no_python_is_an_engine_and_the_python_parent_is_not(tmp_path):
    run = run_tree([sys.executable, "-c", PARENT], tmp_path / "log.txt", cwd=tmp_path, poll=0.1, timeout=60)
    assert run.returncode == 0
    assert run.engine_cpu_seconds > 0.5  # the shell's spin, seen at its polls
    assert run.root_cpu_seconds < 0.5  # the Python parent only waited
    assert run.engine_cpu_seconds <= run.cpu_seconds + 0.05  # a part of the tree's exact total
