"""hardware.layout=auto's choice, from measurements: pure functions, no torch, no processes.

The probe (app/layout_probe.py) measures this machine and env (one env step, the policy acting at a few batch
sizes, the learner's step on the run's model and batch) and then runs the sampler for a few seconds in the
likeliest layouts, the learner's passes in the loop. This module turns those figures into a pick:

- `candidates`: the layouts within bounds for the machine (workers up to twice the cores, envs per worker a
  power of two, 1 or 2 splits, acting in the worker or in a server), minus the keys the user fixed.
- `predicted`: a model of a layout's training rate from the measured costs, which orders the candidates the
  probe runs for real (it has time for a few only).
- `training_rate`: the model's view of the learner in the loop. On one machine the learner and the sampler share
  the cores: at a rate of R transitions/s, the sampler's CPU cost per transition plus the learner's must fit the
  cores (R x (cpu + learner) <= cores), the learner, one process, cannot consume more than 1 / learner
  transitions/s, and the sampler gives no more than it could alone.
- `pick`: the best measured training rate (transitions the learner's passes consumed per second); layouts within
  TIE of it count as equal and the one that costs the least sampler CPU per transition wins (headroom for the
  learner and the machine's other work).

All rates here are transitions (agent steps) per second; the line printed converts them to env frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from omegaconf import OmegaConf

KEYS = ("num_workers", "num_envs_per_worker", "worker_num_splits", "inference")  # what the probe picks
RANK_BAND = 0.1  # predicted rates this close are ordered by their cost instead
TIE = 0.03  # rates this close to the best count as the best (measurement noise)
# A server round trip per request (pipe write, wake-up, answer), CPU seconds on each side: a constant of the
# machine's OS rather than of the env, so it is not measured per probe.
REQUEST_S = 1e-4


@dataclass(frozen=True, order=True)
class Candidate:
    """One layout: rollout worker processes, envs each, splits of those envs, where the policy acts."""

    workers: int
    envs: int
    splits: int
    inference: str

    def values(self) -> Dict[str, object]:
        """The hardware keys of this layout."""
        return dict(zip(KEYS, (self.workers, self.envs, self.splits, self.inference)))

    def __str__(self) -> str:
        return (f"num_workers={self.workers}, num_envs_per_worker={self.envs}, worker_num_splits={self.splits}, "
                f"inference={self.inference}")


@dataclass(frozen=True)
class Costs:
    """What the probe measured in its own process, before any sampler run."""

    cores: int  # the cores this run may use
    env_step_s: float  # seconds of one env step (random action), the env's own processes included
    act_s: Mapping[int, float]  # seconds of one acting call of the policy, by batch size (rows)
    learner_s: float  # learner seconds per transition (every epoch's passes over it)
    learner_on_cpu: bool = True  # the learner's work takes CPU from the sampler (hardware.device=cpu)


@dataclass(frozen=True)
class Measured:
    """A layout's rate: transitions trained per second (a short sampler run with the learner's passes in the loop,
    or the model's prediction), the sampler processes' CPU seconds per transition (workers, servers, env
    processes) and the share of the time the learner's passes took."""

    rate: float
    cpu_per_step: float
    learner_busy: float = 0.0


def candidates(cores: int, fixed: Optional[Mapping[str, object]] = None, env_counts: Sequence[int] = (8, 16, 32, 64),
               max_envs: int = 512) -> List[Candidate]:
    """Every layout within bounds for `cores`: 1, cores/2, cores and 2 x cores workers, each of `env_counts`
    envs per worker (at most `max_envs` in all), 1 or 2 splits, in_worker or server acting. A key in `fixed`
    (typed by the user) takes only that value; a fixed value outside the bounds is taken as it is."""
    fixed = dict(fixed or {})
    workers = sorted({1, max(1, cores // 2), cores, 2 * cores})
    options = {
        "num_workers": [fixed["num_workers"]] if "num_workers" in fixed else workers,
        "num_envs_per_worker": [fixed["num_envs_per_worker"]] if "num_envs_per_worker" in fixed else list(env_counts),
        "worker_num_splits": [fixed["worker_num_splits"]] if "worker_num_splits" in fixed else [1, 2],
        "inference": [str(fixed["inference"])] if "inference" in fixed else ["in_worker", "server"],
    }
    out = []
    for w in options["num_workers"]:
        for e in options["num_envs_per_worker"]:
            for s in options["worker_num_splits"]:
                for p in options["inference"]:
                    explicit = {"num_workers", "num_envs_per_worker"} <= fixed.keys()
                    if e % s or (w * e > max_envs and not explicit):
                        continue
                    out.append(Candidate(int(w), int(e), int(s), p))
    return out


def act_cost(act_s: Mapping[int, float], rows: float) -> float:
    """Seconds of one acting call of `rows` rows, interpolated linearly between the measured batch sizes (and
    extrapolated from the two nearest beyond them)."""
    sizes = sorted(act_s)
    if len(sizes) == 1:
        return act_s[sizes[0]] * max(rows, 1) / sizes[0]
    lo, hi = sizes[0], sizes[1]
    for a, b in zip(sizes, sizes[1:]):
        lo, hi = a, b
        if rows <= b:
            break
    slope = (act_s[hi] - act_s[lo]) / (hi - lo)
    return max(act_s[lo] + slope * (rows - lo), 1e-7)


def sampler_cost(c: Candidate, costs: Costs) -> Tuple[float, float]:
    """The model's (CPU seconds per transition of the sampling side, transitions/s it could reach alone)."""
    per_split = c.envs / c.splits
    if c.inference == "in_worker":
        cpu = costs.env_step_s + act_cost(costs.act_s, per_split) / per_split
        busy = c.workers  # processes that work
        serial_cap = math.inf
    else:  # a server batches the splits waiting; one request per split and step costs both sides a round trip
        batch = max(per_split, c.workers * per_split / 2)
        act_per_step = act_cost(costs.act_s, batch) / batch
        cpu = costs.env_step_s + act_per_step + 2 * REQUEST_S / per_split
        busy = c.workers + 1
        serial_cap = 1.0 / (act_per_step + REQUEST_S / per_split)  # one server process
        if c.splits == 1:  # nothing steps while a worker waits for its actions
            per_worker = 1.0 / (costs.env_step_s + act_per_step + 2 * REQUEST_S / per_split)
            serial_cap = min(serial_cap, c.workers * per_worker)
    crowding = max(1.0, busy / costs.cores) ** 0.5  # more processes than cores: switches, caches
    rate = min(min(busy, costs.cores) / (cpu * crowding), serial_cap)
    return cpu * crowding, rate


def training_rate(sampling: Measured, costs: Costs) -> float:
    """Transitions/s of training with a sampler that gave `sampling` alone: no more than it gave, no more than
    the learner consumes, and the sampler's and the learner's CPU together within the cores."""
    learner_cap = 1.0 / costs.learner_s if costs.learner_s > 0 else math.inf
    learner_cpu = costs.learner_s if costs.learner_on_cpu else 0.0
    per_step = sampling.cpu_per_step + learner_cpu
    shared = costs.cores / per_step if per_step > 0 else math.inf
    return min(sampling.rate, learner_cap, shared)


def predicted(c: Candidate, costs: Costs) -> float:
    """The model's training rate of layout `c` (transitions/s), before any sampler run."""
    cpu, rate = sampler_cost(c, costs)
    return training_rate(Measured(rate, cpu), costs)


def ranked(cands: Sequence[Candidate], costs: Costs) -> List[Candidate]:
    """Candidates by predicted training rate, best first, rates within RANK_BAND of each other counting as equal
    (the model is rough, its learner the passes alone): among those, a worker per core first (the layouts measured
    best on few cores: docs/guides/throughput.md), then fewer envs in all (a shorter start in the probe, less CPU),
    then fewer processes."""
    def key(c: Candidate):
        band = -math.floor(math.log(max(predicted(c, costs), 1e-9)) / math.log(1 + RANK_BAND))
        return band, abs(c.workers - costs.cores), c.workers * c.envs, c.workers + (c.inference == "server"), c

    return sorted(cands, key=key)


def pick(measured: Mapping[Candidate, Measured]) -> Tuple[Candidate, str]:
    """(the layout, why) among the measured ones: the best training rate; within TIE of it, the least sampler
    CPU per transition. Raises ValueError when nothing was measured."""
    if not measured:
        raise ValueError("no layout was measured")
    best = max(m.rate for m in measured.values())
    near = [c for c in measured if measured[c].rate >= best * (1 - TIE)]
    choice = min(near, key=lambda c: (measured[c].cpu_per_step, c))
    m = measured[choice]
    others = sorted((c for c in measured if c != choice), key=lambda c: -measured[c].rate)
    runner = f"; next best {others[0]}: {measured[others[0]].rate:,.0f}" if others else ""
    why = (f"{m.rate:,.0f} steps/s trained with the learner's passes {m.learner_busy:.0%} busy, sampler "
           f"{m.cpu_per_step * 1e6:,.1f} us CPU per step{runner}; {len(measured)} layouts run")
    return choice, why


def typed_layout_keys(overrides: Iterable[str]) -> Tuple[str, ...]:
    """The layout keys (KEYS) typed on the command line (`hardware.num_workers=4`): the probe keeps them."""
    typed = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    return tuple(k for k in KEYS if f"hardware.{k}" in typed)


def fixed_values(cfg, typed: Iterable[str]) -> Dict[str, object]:
    """The typed layout keys' values in `cfg` (num_workers=auto resolved to the cores)."""
    return {k: (str(v) if k == "inference" else int(v))
            for k in typed for v in [OmegaConf.select(cfg, f"hardware.{k}")]}
