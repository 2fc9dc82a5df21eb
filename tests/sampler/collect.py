"""Run the real sampler (worker processes, shared buffers) without a learner and read back
what it wrote: the tests of multi-agent envs, PettingZoo and batched sampling use this."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, List

import torch

from sf_hydra.config import validate
from sf_hydra.plan import plan_run
from sf_hydra.sampler.env_info import describe_env
from sf_hydra.sampler.sampler import Sampler


@dataclass
class Collected:
    batch: Dict[str, torch.Tensor]  # the gathered slots, concatenated on dim 0
    episodes: List[tuple] = field(default_factory=list)  # (return, length) per finished agent episode
    frames: int = 0
    model: torch.nn.Module = None  # the policy the workers acted with (version 0)
    workers: List[int] = field(default_factory=list)  # the worker that filled each gathered slot, in order


@contextmanager
def running_sampler(cfg):
    """A started sampler acting with a fresh model; stopped (processes reaped) on exit."""
    validate(cfg)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    info = describe_env(cfg.env, seed=cfg.seed)
    plan = plan_run(cfg, info)
    model = plan.initial_policies[0]
    sampler = Sampler(plan.sampler, plan.spec, plan.spaces, model)
    sampler.model = model
    try:
        sampler.publish(0, model, 0)
        sampler.start()
        yield sampler
    finally:
        sampler.stop()


def collect(cfg, min_slots: int, timeout: float = 60.0, from_workers: int = 0) -> Collected:
    """Polls until at least `min_slots` trajectories arrived, from at least `from_workers` distinct
    workers; copies them out and frees them."""
    with running_sampler(cfg) as sampler:
        parts, out = [], Collected(batch={})
        count, deadline = 0, time.monotonic() + timeout
        while count < min_slots or len(set(out.workers)) < from_workers:
            assert time.monotonic() < deadline, (f"only {count} of {min_slots} trajectories from "
                                                 f"{len(set(out.workers))} of {from_workers} workers in {timeout} s")
            traj = sampler.poll(0.5)
            if traj is None:
                continue
            out.episodes += traj.episodes
            out.frames += traj.frames
            if traj.slots:
                parts.append(sampler.buffers.gather(torch.tensor(traj.slots)))
                out.workers += [traj.worker_id] * len(traj.slots)
                sampler.free(traj.slots)
                count += len(traj.slots)
        out.batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
        out.model = sampler.model
        return out
