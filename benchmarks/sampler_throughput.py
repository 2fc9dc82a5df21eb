"""Sampling throughput of one rollout worker, no learner: batched sampling off vs on.

    python benchmarks/sampler_throughput.py --repeats 5 --seconds 5 -- env=gym/cartpole

Each run is a fresh process that builds the sampler in serial mode with one worker
(`hardware.num_workers=1`, the worker's own policy copy acting, trajectories written to
the shared buffers and freed at once), warms up for 3 rollouts, then counts env frames for
--seconds. Variants alternate (off, on, envpool, off, on, ...) so that a busy machine
hurts them alike; medians are printed, of wall-clock FPS and of frames per CPU-second of
the process (all its threads: EnvPool's too), which a shared machine disturbs less, and the worker's
own profile: the shares of its rollout time spent acting (inference), stepping envs (the env loop, our
per-env bookkeeping included), on the rest of the bookkeeping and waiting for slots. Training FPS
(throughput.py) also includes the learner, which on CartPole is the bottleneck: this script
isolates the sampling side that `hardware.batched_sampling` changes.

Variants: `off` (one env per Python loop iteration), `on` (hardware.batched_sampling=true,
the env's own vectorized version if gymnasium has one, else SyncVectorEnv), `envpool`
(hardware.vector_backend=envpool; left out when envpool is not installed), `rows` (as
`off`, but stepped by the agent-rows worker, the multi-agent/batched loop: what the
single-agent worker's own loop saves).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, fmt, median, print_table, python_env, ratio  # noqa: E402

VARIANTS = {
    "off": ["hardware.batched_sampling=false"],
    "on": ["hardware.batched_sampling=true"],
    "envpool": ["hardware.batched_sampling=true", "hardware.vector_backend=envpool"],
    "rows": ["hardware.batched_sampling=false"],  # off, through the agent-rows worker (see measure)
}


PARTS = ("inference", "env_step", "bookkeeping", "wait_for_slots")  # Trajectories.timing's keys


def measure(overrides: Sequence[str], seconds: float, agent_rows: bool = False) -> Tuple[float, ...]:
    """In this process: env frames per wall-clock second and per CPU-second of one serial-mode
    worker, then the shares of its rollout time (PARTS, from its messages). agent_rows: a
    single-agent env stepped by the agent-rows worker (one row per env, the multi-agent/batched
    loop) instead of the single-agent worker's loop."""
    import torch
    from hydra import compose, initialize_config_dir

    from sf_hydra.config import register_configs, validate
    from sf_hydra.plan import plan_run
    from sf_hydra.sampler.env_info import describe_env
    from sf_hydra.sampler.sampler import Sampler

    torch.set_num_threads(1)
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[*overrides, "hardware.serial_mode=true", "hardware.num_workers=1"])
    validate(cfg)
    info = describe_env(cfg.env, seed=cfg.seed)
    plan = plan_run(cfg, info)
    model = plan.initial_policies[0]
    sampler = Sampler(plan.sampler, plan.spec, plan.spaces, model)
    if agent_rows:
        from sf_hydra.sampler.agent_rows_worker import AgentRowsWorker

        sampler.worker_cls = AgentRowsWorker
    sampler.publish(0, model, 0)
    sampler.start()
    try:
        for _ in range(3):
            sampler.free(sampler.poll().slots)
        frames, start, cpu_start = 0, time.perf_counter(), time.process_time()
        spent = dict.fromkeys(PARTS, 0.0)
        while time.perf_counter() - start < seconds:
            traj = sampler.poll()
            sampler.free(traj.slots)
            frames += traj.frames
            for part in PARTS:
                spent[part] += traj.timing.get(part, 0.0)
        total = sum(spent.values()) or 1.0
        return (frames / (time.perf_counter() - start), frames / (time.process_time() - cpu_start),
                *(spent[part] / total for part in PARTS))
    finally:
        sampler.stop()


def run_child(overrides: Sequence[str], seconds: float, agent_rows: bool = False) -> Tuple[Optional[float], ...]:
    rows = ["--agent-rows"] if agent_rows else []
    cmd = [sys.executable, __file__, "--child", *rows, "--seconds", str(seconds), "--", *overrides]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=python_env(), cwd=REPO, timeout=600)
    if proc.returncode != 0:
        print(f"  failed: {' '.join(overrides)}\n{proc.stderr[-2000:]}", flush=True)
        return (None,) * (2 + len(PARTS))
    return tuple(float(v) for v in proc.stdout.strip().splitlines()[-1].split())


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run (after warm-up)")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--agent-rows", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="after `--`: Hydra overrides for every variant (env=..., ...)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child:
        print(" ".join("%.4f" % v for v in measure(args.overrides, args.seconds, args.agent_rows)))
        return
    variants = [v for v in args.variants if v != "envpool" or importlib.util.find_spec("envpool")]
    wall: Dict[str, List[Optional[float]]] = {v: [] for v in variants}
    cpu: Dict[str, List[Optional[float]]] = {v: [] for v in variants}
    shares: Dict[str, List[Tuple[Optional[float], ...]]] = {v: [] for v in variants}
    for i in range(args.repeats):
        for variant in variants:
            fps, per_cpu, *parts = run_child([*args.overrides, *VARIANTS[variant]], args.seconds, variant == "rows")
            wall[variant].append(fps)
            cpu[variant].append(per_cpu)
            shares[variant].append(tuple(parts))
            print(f"  run {i} {variant}: {fmt(fps)} FPS, {fmt(per_cpu)} frames per CPU-second; worker time "
                  + ", ".join(f"{part} {fmt(share, '.0%')}" for part, share in zip(PARTS, parts)), flush=True)
    print()
    print_table(["batched sampling", "median FPS", "vs off", "frames/CPU-s", "vs off", *PARTS], [
        [v, fmt(median(wall[v])), fmt(ratio(median(wall[v]), median(wall.get("off", []))), ".2f"),
         fmt(median(cpu[v])), fmt(ratio(median(cpu[v]), median(cpu.get("off", []))), ".2f"),
         *(fmt(median(s[k] for s in shares[v]), ".0%") for k in range(len(PARTS)))] for v in variants
    ])


if __name__ == "__main__":
    main()
