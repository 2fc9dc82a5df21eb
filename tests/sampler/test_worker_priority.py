"""Rollout workers run at hardware.worker_nice, so on a CPU-bound machine the learner (the
pipeline's one serial stage, in this process) gets the core whenever both are ready."""

import os

from tests.conftest import make_cfg
from tests.sampler.collect import running_sampler


def test_worker_processes_run_at_the_configured_nice_level(tmp_path):
    cfg = make_cfg(tmp_path, "hardware.num_workers=2", "hardware.worker_nice=7")
    own = os.getpriority(os.PRIO_PROCESS, 0)
    with running_sampler(cfg) as sampler:
        assert sampler.poll(30.0) is not None  # the workers are up and stepping
        levels = [os.getpriority(os.PRIO_PROCESS, p.pid) for p in sampler.processes]
    assert levels == [own + 7, own + 7]
    assert os.getpriority(os.PRIO_PROCESS, 0) == own  # the learner's process keeps its priority
