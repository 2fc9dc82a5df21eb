"""Learning unchanged by data parallelism: CartPole to a target average return on one learner rank and on two
(`hardware.devices=2` on this machine, gloo), seed by seed; the medians of the env steps each layout needed.

    python benchmarks/ddp_learning.py                      # seeds 0 1 2, target 450, the same update batch
    python benchmarks/ddp_learning.py --seeds 0 1 2 3 4 --batch per-rank

`--batch global` (the default) keeps the update's minibatch the same: each of the two ranks takes half of it
(algo.batch_size halved), so the two layouts make the same updates from the same amount of experience and should
need about the same env steps; `--batch per-rank` keeps each rank's batch (the scaling benchmark's layout), so a
two-rank update learns from twice the frames. Each run is `python train.py env=gym/cartpole
train_until_avg_return=TARGET seed=S hardware.num_workers=1 [hardware.devices=2 ...]`; a run that ends for
another reason (its env-step budget) counts as not reaching the target. Layouts alternate within a seed, so a
change of the shared machine's load hits both alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, median, print_table, python_env, read_summary, run_tree, start_benchmark, train_py_command  # noqa: E402

BATCH = 1024  # CartPole's algo.batch_size (conf/env/gym/cartpole.yaml)


def overrides(ranks: int, seed: int, target: float, batch: str, work: Path) -> List[str]:
    """train.py's overrides of one run: `ranks` learner ranks, the update batch by `batch` (global: halved per
    rank; per-rank: each rank's as one rank's)."""
    tag = f"r{ranks}_s{seed}"
    out = ["env=gym/cartpole", f"train_dir={work}", f"experiment={tag}", f"seed={seed}",
           f"train_until_avg_return={target:g}", "hardware.num_workers=1", "logger.progress=lines"]
    if ranks > 1:
        out += [f"hardware.devices={ranks}"]
        if batch == "global":
            out += [f"algo.batch_size={BATCH // ranks}"]
    return out


def run(ranks: int, seed: int, args, work: Path) -> dict:
    """One run's env steps and training seconds to the target (None: not reached) and its stop reason."""
    cmd = train_py_command(sys.executable, [*overrides(ranks, seed, args.target, args.batch, work), *args.overrides])
    proc = run_tree(cmd, work / f"r{ranks}_s{seed}.log", cwd=work, env=python_env(), timeout=args.timeout)
    summary = read_summary(work / f"r{ranks}_s{seed}")
    reached = "train_until_avg_return" in str(summary.get("stop_reason"))
    return {"ranks": ranks, "seed": seed, "steps": summary.get("env_steps") if reached else None,
            "seconds": summary.get("train_seconds") if reached else None, "reason": summary.get("stop_reason"),
            "wall": proc.wall_seconds, "exit": proc.returncode}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target", type=float, default=450.0)
    parser.add_argument("--batch", choices=["global", "per-rank"], default="global")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run before it is killed")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep runs here (default: a temp dir)")
    parser.add_argument("overrides", nargs="*", help="after `--`: extra Hydra overrides for every run")
    args, work = start_benchmark(parser, argv, "ddp_learning_")
    print(f"work folder {work}", flush=True)
    results = []
    for i, seed in enumerate(args.seeds):
        for ranks in ((1, 2) if i % 2 == 0 else (2, 1)):
            r = run(ranks, seed, args, work)
            results.append(r)
            print(f"{ranks} rank(s) seed {seed}: {fmt(r['steps'])} env steps, {fmt(r['seconds'], '.0f')} s to "
                  f"{args.target:g} ({r['reason']}), wall {r['wall']:.0f} s", flush=True)
    print_table(["ranks", "seed", "env steps to target", "s to target", "stop reason"],
                [[str(r["ranks"]), str(r["seed"]), fmt(r["steps"]), fmt(r["seconds"], ".0f"), str(r["reason"])]
                 for r in results])
    print()
    print(f"| ranks | batch | seeds | reached | median env steps to {args.target:g} | median s |")
    print("|---:|---|---|---:|---:|---:|")
    for ranks in (1, 2):
        mine = [r for r in results if r["ranks"] == ranks]
        print(f"| {ranks} | {args.batch if ranks > 1 else BATCH} | {' '.join(str(r['seed']) for r in mine)} "
              f"| {sum(r['steps'] is not None for r in mine)}/{len(mine)} | {fmt(median(r['steps'] for r in mine))} "
              f"| {fmt(median(r['seconds'] for r in mine), '.0f')} |")


if __name__ == "__main__":
    main()
