"""Where a run's time goes: seconds per component, summed over a session's training loop (from the start of
training to its last iteration), printed at its end and kept in summary.json (`profile`), as Sample Factory
prints its timing at exit.

Two groups, measured differently:
- `learner`: the training process's own wall clock. Its parts never overlap, so they add up to at most
  the session's seconds; what they leave is `other` (Lightning's loop, logging, the callbacks' rest).
- `workers`: every rollout worker's seconds, summed over the workers (2 workers busy for 10 s: 20 s);
  each part's fraction is of the workers' total. They count from the learner's first request for data:
  a fresh run's workers collect while the learner starts, then wait for slots, and those seconds are
  start-up, left out (sampler/training_batches.py `timing_since`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Dict, List, Optional

# The learner's parts, in the order an iteration passes through them.
LEARNER_PARTS = {
    "start_workers": "starting the rollout worker processes and their envs (the session's first seconds)",
    "wait_for_data": "waiting for trajectories from the rollout workers",
    "gather_batch": "copying a batch's trajectories out of the shared slots",
    "to_device": "moving the batch to the learner's device (CUDA: queued non-blocking copies from pinned memory)",
    "prepare_batch": "normalizer updates, advantages and value targets (GAE or V-trace), minibatch layout",
    "forward_backward": "the losses' forward and backward passes",
    "optimizer": "gradient norm, clipping and the optimizer step",
    "publish_weights": "copying new weights to the rollout workers' shared memory",
    "checkpoints": "periodic, best and milestone checkpoints",
    "summaries": "scalars to TensorBoard / W&B and the progress display",
}
# Learner parts measured only in runs whose feature is on.
OPTIONAL_LEARNER_PARTS = {
    "evaluation": "handing weights to the evaluation process and logging its results (eval.*)",
}
# The rollout workers' parts (sampler/rollout_worker.py measures them per rollout).
WORKER_PARTS = {
    "env_step": "stepping the envs",
    "inference": "the policy copy acting (forward pass, sampling actions)",
    "wait_for_slots": "waiting for free trajectory slots (the learner is behind)",
    "bookkeeping": "writing trajectories, episode statistics, messages",
}


class RunProfile:
    """Seconds per component since the session began (the invariant: learner parts never overlap in time)."""

    def __init__(self):
        self.start = time.perf_counter()
        self.end = None  # stop(): the training loop ended (the final checkpoint and teardown are not profiled)
        self.learner: Dict[str, float] = defaultdict(float)
        self.workers: Dict[str, float] = defaultdict(float)
        # seconds from the process's launch (interpreter start-up and imports included) to the session's
        # first trajectory at the learner and to its first finished update; set once each
        self.startup: Dict[str, float] = {}

    @contextmanager
    def part(self, name: str):
        """Times a learner part (the block's wall-clock seconds are added to `name`)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.learner[name] += time.perf_counter() - t0

    def stop(self) -> None:
        if self.end is None:
            self.end = time.perf_counter()

    def mark_startup(self, name: str, seconds_since_launch: Optional[float]) -> None:
        """Records a start-up milestone the first time it is reported (later calls keep the first)."""
        if seconds_since_launch is not None and name not in self.startup:
            self.startup[name] = float(seconds_since_launch)

    def add_workers(self, seconds: Dict[str, float]) -> None:
        for name, value in seconds.items():
            self.workers[name] += value

    def add_batch(self, meta: dict) -> None:
        """What a batch's meta (this rank's) says of where time went: the learner's wait for it, its gathering,
        the workers' start, the rollout workers' seconds per activity and their start-up milestones."""
        self.learner["wait_for_data"] += meta["wait_seconds"]
        self.learner["gather_batch"] += meta.get("gather_seconds", 0.0)
        self.learner["start_workers"] += meta.get("start_seconds", 0.0)
        self.add_workers(meta["worker_seconds"])
        self.mark_startup("first_rollout_s", meta.get("first_rollout_s"))
        self.mark_startup("first_trajectory_s", meta.get("first_trajectory_s"))

    def report(self) -> dict:
        """{session_seconds, learner: {part: {seconds, fraction}}, workers: {...}, startup: {milestone: s}};
        learner fractions are of the session (with `other` the rest), worker fractions of the workers'
        summed seconds; startup's seconds count from the process's launch."""
        session = (self.end or time.perf_counter()) - self.start
        learner = dict(self.learner)
        learner["other"] = max(0.0, session - sum(learner.values()))
        workers_total = sum(self.workers.values())
        return {
            "session_seconds": session,
            "learner": _shares(learner, session),
            "workers": _shares(dict(self.workers), workers_total),
            "startup": dict(self.startup),
        }


def _shares(seconds: Dict[str, float], total: float) -> Dict[str, dict]:
    return {name: {"seconds": round(value, 3), "fraction": round(value / total, 4) if total > 0 else 0.0}
            for name, value in seconds.items()}


def profile_lines(report: dict) -> List[str]:
    """The log's form: one line per group, parts by their share, largest first."""
    def group(parts: Dict[str, dict]) -> str:
        ordered = sorted(parts.items(), key=lambda kv: -kv[1]["seconds"])
        return ", ".join(f"{name} {p['seconds']:.1f} s ({100 * p['fraction']:.0f}%)" for name, p in ordered)

    lines = [f"profile of this session ({report['session_seconds']:.1f} s): learner: {group(report['learner'])}"]
    if report["workers"]:
        lines.append(f"profile: rollout workers (seconds summed over workers): {group(report['workers'])}")
    startup = report.get("startup") or {}
    if startup:
        names = {"first_rollout_s": "first rollout reported", "first_trajectory_s": "learner's first trajectory",
                 "first_update_s": "first update"}
        lines.append("start-up, seconds after launch: " + ", ".join(
            f"{names.get(k, k)} {v:.1f} s" for k, v in startup.items()))
    return lines
