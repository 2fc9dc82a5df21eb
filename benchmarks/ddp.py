"""Data-parallel ranks against one learner on the same cores: `python train.py` on CartPole (its default config,
early stop at 480 kept) as 1 rank x 2 rollout workers and as 2 ranks x 1 rollout worker (`hardware.devices=2`).

    python benchmarks/ddp.py --seeds 3
    python benchmarks/ddp.py --seeds 3 --layouts 1x2 2x1 4x1 -- hardware.num_envs_per_worker=32

Printed per layout and seed: the steady FPS (env steps per second between the first and last TensorBoard
report), the env steps and seconds since launch at the first 100-episode average return >= 450 (learning per
frame), the final average return, the wall time, the peak memory of the whole process tree (PSS: shared pages
split) and the other processes' CPU use meanwhile (the machine may be shared); then medians per layout.
The all-reduce cost: the model's parameters (one all-reduce of them per minibatch) timed over gloo between two
local processes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    add_run_arguments,
    first_reaching,
    fmt,
    median,
    print_table,
    python_env,
    read_summary,
    read_tb_scalars,
    run_tree,
    start_benchmark,
    steady_fps,
    train_py_command,
    wait_for_quiet,
)

TARGET = 450.0


def run(layout: str, seed: int, work: Path, overrides: List[str], timeout: float) -> dict:
    ranks, workers = (int(n) for n in layout.split("x"))
    train_dir = work / f"{layout}_seed{seed}"
    cmd = train_py_command(sys.executable, [f"train_dir={train_dir}", "experiment=run", f"seed={seed}",
                                            f"hardware.devices={ranks}", f"hardware.num_workers={workers}",
                                            "logger.experiment_summaries_interval=2", *overrides])
    proc = run_tree(cmd, work / f"{layout}_seed{seed}.log", cwd=work, env=python_env(), timeout=timeout)
    run_dir = train_dir / "run"
    steps, secs = first_reaching(read_tb_scalars(run_dir, "episode/return"), TARGET, proc.start_time)
    return {"layout": layout, "seed": seed, "ok": proc.returncode == 0,
            "fps": steady_fps(read_tb_scalars(run_dir, "perf/env_steps")), "steps": steps, "secs": secs,
            "final": read_summary(run_dir).get("avg_return"), "wall": proc.wall_seconds, "pss": proc.peak_pss_mb,
            "other_cpu": proc.other_cpu}


def _allreduce_worker(rank: int, port: int, numel: int, repeats: int, out) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    flat = torch.zeros(numel)
    for _ in range(20):
        dist.all_reduce(flat)
    start = time.perf_counter()
    for _ in range(repeats):
        dist.all_reduce(flat)
    if rank == 0:
        out.put((time.perf_counter() - start) / repeats)
    dist.destroy_process_group()


def allreduce_seconds(numel: int, repeats: int = 500) -> float:
    """Seconds per all-reduce of `numel` float32 between two local processes over gloo."""
    import multiprocessing as mp

    from sf_hydra.app.ranks import free_port

    ctx = mp.get_context("spawn")
    out, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=_allreduce_worker, args=(r, port, numel, repeats, out)) for r in range(2)]
    for p in procs:
        p.start()
    seconds = out.get(timeout=120)
    for p in procs:
        p.join()
    return seconds


def model_parameters(results: List[dict], work: Path) -> int:
    """The numbers in the trained model's weights (its checkpoint's state_dict: parameters and normalizer
    buffers; the all-reduce carries the parameters' gradients, about as many)."""
    import torch

    for r in results:
        ckpt = work / f"{r['layout']}_seed{r['seed']}" / "run" / "checkpoints" / "last.ckpt"
        if ckpt.is_file():
            weights = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
            return sum(t.numel() for t in weights.values() if t.is_floating_point())
    raise SystemExit("no run left a checkpoint")


def report(results: List[dict], layouts: List[str]) -> None:
    rows = [[r["layout"], str(r["seed"]), fmt(r["fps"]), fmt(r["steps"]), fmt(r["secs"], ".0f"), fmt(r["final"], ".1f"),
             fmt(r["wall"], ".0f"), fmt(r["pss"]), fmt(r["other_cpu"], ".2f"), "" if r["ok"] else "FAILED"]
            for r in results]
    print_table(["ranks x workers", "seed", "FPS", "steps to 450", "s to 450", "final return", "wall s",
                 "peak PSS MB", "other CPU", ""], rows)
    print()
    for layout in layouts:
        mine = [r for r in results if r["layout"] == layout]
        print(f"{layout}: median FPS {fmt(median(r['fps'] for r in mine))}, steps to 450 "
              f"{fmt(median(r['steps'] for r in mine))}, seconds to 450 {fmt(median(r['secs'] for r in mine), '.0f')}, "
              f"peak PSS {fmt(median(r['pss'] for r in mine))} MB")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--layouts", nargs="+", default=["1x2", "2x1"], help="ranks x rollout workers per rank")
    add_run_arguments(parser, timeout=600.0)
    args, work = start_benchmark(parser, argv, "ddp_")
    results = []
    for seed in range(args.seeds):
        for layout in args.layouts:  # interleaved: a change in the machine's load hits every layout alike
            if args.wait_quiet:
                wait_for_quiet(args.wait_quiet)
            results.append(run(layout, seed, work, args.overrides, args.timeout))
            r = results[-1]
            print(f"{layout} seed {seed}: FPS {fmt(r['fps'])}, 450 at {fmt(r['steps'])} steps / "
                  f"{fmt(r['secs'], '.0f')} s, wall {r['wall']:.0f} s", flush=True)
    print()
    report(results, args.layouts)
    numel = model_parameters(results, work)
    seconds = allreduce_seconds(numel)
    print(f"\nCartPole model: {numel:,} numbers ({numel * 4 / 1024:.1f} KiB); one gloo all-reduce of them between 2 "
          f"local processes: {seconds * 1e6:.0f} us")


if __name__ == "__main__":
    main()
