"""CPU time of one learner iteration (PPOLearner.training_step: advantages, every epoch's
minibatches, optimizer steps), A/B in alternating child processes, no sampler.

    python benchmarks/learner_update.py --env gym/cartpole --repeats 5
    python benchmarks/learner_update.py --env doom/basic --variant base=build/base/src --variant new=src
    python benchmarks/learner_update.py --env doom/basic --variant fp32=src --variant "bf16=src:+autocast"
    python benchmarks/learner_update.py --advantages     # GAE / V-trace alone, loop vs scan

A variant is `name=SRC[:FLAG,...][;OVERRIDE ...]`: the sf_hydra source folder its child
imports (another commit's `src/`, e.g. from `git worktree add` or `git archive`), flags
(`+autocast`: the step under bf16 autocast, as Lightning's `hardware.precision=bf16-mixed`
runs it; `+channels_last`: the model and image batches in channels-last memory format;
`+compile`: torch.compile of the model's `evaluate`, the first step's CPU time reported apart) and Hydra overrides.

Each child builds the learner from the run's plan (as train.py does, the env's own spaces),
fills one training batch of the env's config (`batch_size x num_batches_per_epoch`
transitions, T = algo.rollout) with random data of the right shapes and episode ends, runs
--warmup iterations, then times --steps iterations with `time.process_time` (one torch
thread). Variants alternate (a, b, a, b, ...) --repeats times so that a shared machine
hurts them alike; the table gives the median of the per-repeat medians (ms CPU per
iteration) and its ratio to the first variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, fmt, print_table  # noqa: E402


def random_batch(spec, rows: int, rollout: int, obs_space, action_space, seed: int = 0, done_rate: float = 0.03):
    """A [rows, rollout] training batch of every spec field: observations in the space's range,
    valid actions, behaviour log-probs near a uniform policy's, `done_rate` of the steps episode ends (3%: episodes of
    ~33 steps; Doom basic's trained agent ends one in ~7 steps), a few time-outs."""
    import gymnasium as gym
    import torch

    g = torch.Generator().manual_seed(seed)
    batch = {}
    for field in spec:
        shape = (rows, field.steps(rollout), *field.shape)
        name = field.name
        if name.startswith("obs"):
            if field.dtype == torch.uint8:
                batch[name] = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
            else:
                batch[name] = torch.randn(shape, generator=g).to(field.dtype)
        elif name == "actions":
            n = action_space.n if isinstance(action_space, gym.spaces.Discrete) else 2
            batch[name] = torch.randint(0, n, shape, generator=g).to(field.dtype)
        elif name == "log_probs":
            batch[name] = torch.full(shape, -1.0) + 0.1 * torch.randn(shape, generator=g)
        elif name == "dones":
            batch[name] = (torch.rand(shape, generator=g) < done_rate).float()
        elif name == "time_outs":
            batch[name] = (torch.rand(shape, generator=g) < 0.005).float() * batch.get("dones", 1.0)
        elif field.dtype.is_floating_point:
            batch[name] = torch.randn(shape, generator=g).to(field.dtype)
        else:
            batch[name] = torch.zeros(shape, dtype=field.dtype)
    if "time_outs" in batch:
        batch["time_outs"] = batch["time_outs"] * batch["dones"]
    return batch


def child(args) -> None:
    """One variant's measurement, printed as one JSON line."""
    import contextlib

    import lightning as L
    import torch
    from hydra import compose, initialize_config_dir

    from sf_hydra.config import register_configs, validate
    from sf_hydra.learner.ppo_learner import PPOLearner
    from sf_hydra.plan import plan_run
    from sf_hydra.sampler.env_info import describe_env

    torch.set_num_threads(1)
    flags = set(args.flags.split(",")) if args.flags else set()
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[f"env={args.env}", *args.overrides])
    validate(cfg)
    torch.manual_seed(0)
    info = describe_env(cfg.env, seed=0)
    plan = plan_run(cfg, info)
    learner = PPOLearner(plan.initial_policies, plan.learner, plan.spec)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.strategy.connect(learner)
    learner.trainer = trainer
    learner.log = lambda *a, **k: None  # no fit loop to log into
    optimizers = learner.configure_optimizers()
    trainer.strategy.optimizers = optimizers if isinstance(optimizers, list) else [optimizers]
    learner.on_train_start()  # as fit starts training (the choices it makes for the loop, learner/ppo_learner.py)
    rollout = int(cfg.algo.rollout)
    rows = int(cfg.algo.batch_size) * int(cfg.algo.num_batches_per_epoch) // rollout
    batch = random_batch(plan.spec, rows, rollout, info.observation_space, info.action_space,
                         done_rate=args.done_rate)
    if "+channels_last" in flags:
        learner.to(memory_format=torch.channels_last)
    compile_s = None
    if "+compile" in flags:
        for m in learner.policies:  # the learner's forward pass is `evaluate`, not `forward`
            m.evaluate = torch.compile(m.evaluate)
    meta = {"frames": rows * rollout, "episodes": [], "games": [], "nonfinite_replaced": 0, "env_restarts": 0,
            "dropped_trajectories": 0, "wait_seconds": 0.0, "worker_seconds": {}, "policy": 0}
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if "+autocast" in flags else contextlib.nullcontext

    def step():
        b = dict(batch, meta=dict(meta))
        with autocast():
            learner.training_step(b, 0)

    t0, wall0 = time.process_time(), time.perf_counter()
    step()
    first_s = time.process_time() - t0
    if "+compile" in flags:  # wall clock: inductor compiles in subprocesses, whose CPU time is not ours
        compile_s = time.perf_counter() - wall0
    for _ in range(args.warmup - 1):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.process_time()
        step()
        times.append(time.process_time() - t0)
    print(json.dumps({"ms": 1000 * statistics.median(times), "first_s": first_s, "compile_s": compile_s,
                      "rows": rows, "rollout": rollout, "loss": learner.stats[0].metrics.get("loss/total")}))


def advantages_benchmark(repeats: int, calls: int) -> None:
    """GAE and V-trace at the runs' shapes, the loop references against the vectorized code, in this process."""
    import torch

    from sf_hydra.learner import advantages, vtrace

    torch.set_num_threads(1)
    advantages.SCAN_ROWS_CPU = 1 << 30  # the scan at every shape here, to set it against the loop
    rows = []
    for b, t in [(32, 32), (64, 32), (256, 32), (512, 32), (1024, 32), (64, 64), (32, 128), (2, 1024)]:
        g = torch.Generator().manual_seed(0)
        r, v = torch.randn(b, t, generator=g), torch.randn(b, t + 1, generator=g)
        d, lr = (torch.rand(b, t, generator=g) < 0.03).float(), 0.3 * torch.randn(b, t, generator=g)
        fns = {
            "gae loop": lambda: advantages.gae_loop(r, v, d, 0.99, 0.95),
            "gae scan": lambda: advantages.gae(r, v, d, 0.99, 0.95),
            "vtrace loop": lambda: vtrace.vtrace_loop(lr, r, v, d, 0.99, 1.0, 1.0),
            "vtrace scan": lambda: vtrace.vtrace(lr, r, v, d, 0.99, 1.0, 1.0),
        }
        per: dict = {k: [] for k in fns}
        for _ in range(repeats):
            for name, fn in fns.items():
                n = max(2, calls * 32 // t)  # the loops over 1,024 steps take ~0.1 s a call
                fn()
                t0 = time.process_time()
                for _ in range(n):
                    fn()
                per[name].append(1e6 * (time.process_time() - t0) / n)
        rows.append([f"B={b} T={t}", *(fmt(statistics.median(per[k]), ",.0f") for k in fns)])
    print("microseconds of CPU per call (median of repeats, one torch thread)")
    print_table(["shape", *fns], rows)


def main(argv: List[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="gym/cartpole")
    p.add_argument("--variant", action="append", default=[], help="name=SRC[:FLAG,...][;OVERRIDE ...]")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=10, help="timed iterations per child")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--done-rate", type=float, default=0.03, help="the batch's fraction of steps that end an episode")
    p.add_argument("--advantages", action="store_true", help="GAE / V-trace alone, loop vs scan")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--flags", default="", help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="Hydra overrides for every variant")
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    if args.advantages:
        return advantages_benchmark(args.repeats, args.calls)
    variants = args.variant or ["this=src"]
    parsed = []
    for spec in variants:
        name, rest = spec.split("=", 1)
        rest, _, extra = rest.partition(";")
        src, _, flags = rest.partition(":")
        parsed.append((name, str((REPO / src).resolve()), flags, extra.split() + list(args.overrides)))
    results = {name: [] for name, *_ in parsed}
    last = {}
    for rep in range(args.repeats):
        for name, src, flags, overrides in parsed:
            cmd = [sys.executable, __file__, "--child", "--env", args.env, "--steps", str(args.steps),
                   "--done-rate", str(args.done_rate),
                   "--warmup", str(args.warmup), "--flags", flags, "--", *overrides]
            env = {**__import__("os").environ, "PYTHONPATH": f"{src}:{REPO}"}
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
            if out.returncode != 0:
                sys.exit(f"variant {name} failed:\n{out.stderr[-3000:]}")
            last[name] = json.loads(out.stdout.strip().splitlines()[-1])
            results[name].append(last[name]["ms"])
            print(f"repeat {rep + 1}: {name} {last[name]['ms']:.1f} ms", flush=True)
    first = statistics.median(results[parsed[0][0]])
    rows = []
    for name, *_ in parsed:
        med = statistics.median(results[name])
        compile_s = last[name]["compile_s"]
        rows.append([name, fmt(med, ",.1f"), fmt(med / first, ".2f"), fmt(last[name]["first_s"], ".2f"),
                     fmt(compile_s, ".1f")])
    shape = last[parsed[0][0]]
    print(f"\n{args.env}: one training_step over {shape['rows']} x {shape['rollout']} transitions, "
          f"CPU ms (median of {args.repeats} repeats x {args.steps} steps)")
    print_table(["variant", "ms", "ratio", "first step s", "compile wall s"], rows)


if __name__ == "__main__":
    main(sys.argv[1:])
