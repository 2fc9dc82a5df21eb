"""Sampler.stop ends a run's workers without waiting out their waits: a worker blocked in its wait for
free slots (the learner took its trajectories and freed none, as at a run's end) is woken by an empty
hand-out of slots, so stopping does not last until that wait times out."""

import time

from sf_hydra.sampler.rollout_worker import BEAT_ENV, BEAT_TIME
from tests.conftest import make_cfg
from tests.sampler.collect import running_sampler

SLOT_WAIT_S = 0.5  # a worker's wait for free slots before it looks at the stop flag again (rollout_worker.py)


def _waiting_for_slots(sampler, timeout: float = 60.0) -> None:
    """Takes trajectories (freeing none) until worker 0 waits for free slots, then returns right after it
    began a new wait (a fresh heartbeat: the worker beats before each wait)."""
    deadline = time.monotonic() + timeout
    while not (sampler.heartbeats[0, BEAT_ENV].item() == -1 and sampler.poll(0.6) is None):
        assert time.monotonic() < deadline, "the worker never waited for free slots"
    last = sampler.heartbeats[0, BEAT_TIME].item()
    while sampler.heartbeats[0, BEAT_TIME].item() == last:
        assert time.monotonic() < deadline, "the worker stopped beating"
        time.sleep(0.001)


def test_a_worker_waiting_for_free_slots_stops_before_its_wait_times_out(tmp_path):
    cfg = make_cfg(tmp_path, "hardware.num_workers=1", "hardware.num_envs_per_worker=4")
    took = []
    for _ in range(3):  # the fastest of three: a loaded machine may delay any one stop
        with running_sampler(cfg) as sampler:
            _waiting_for_slots(sampler)
            start = time.monotonic()
            sampler.stop()
            took.append(time.monotonic() - start)
            assert not sampler.processes
    assert min(took) < 0.6 * SLOT_WAIT_S, took
