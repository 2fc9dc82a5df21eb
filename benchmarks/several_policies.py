"""What several policies cost: the same total work trained with algo.num_policies = 1, 2, 4.

    python benchmarks/several_policies.py --preset cartpole_2x16 --policies 1 2 --repeats 3
    python benchmarks/several_policies.py --preset doom_duel_2x8 --policies 1 2 4 --repeats 3

Each run is `python train.py <preset> algo.num_policies=N train_for_env_steps=<total / N>`:
the budget holds per policy (its own env steps), so every run simulates at least the same
total frames; runs of the policy counts alternate (1, 2, 4, 1, 2, 4, ...) so the machine's
drift hits all alike. Nothing stops early (no target return).

Printed per policy count, medians over the repeats:
- frames: the run's total env frames (summary.json);
- wall s: launch to exit, start-up included; FPS (wall) = frames / wall s;
- steady FPS: frames between the first and the last TensorBoard `perf/fps` report with a
  non-zero step count over the time between them (start-up excluded), as throughput.py;
- peak RSS / PSS MB: the whole process tree (learner, rollout workers, env processes),
  sampled every second;
- ratio: FPS (wall) and steady FPS against the one-policy runs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    exit_cleanly_on_signals,
    fmt,
    median,
    print_table,
    python_env,
    ratio,
    read_summary,
    read_tb_scalars,
    run_tree,
    steady_fps,
    train_py_command,
    wait_for_quiet,
)

PRESETS = {
    # The vs_sample_factory.py CartPole preset: MLP 64x64, batch 512, one pass per sample.
    "cartpole_2x16": (400_000, [
        "env=gym/cartpole", "hardware.num_workers=2", "hardware.num_envs_per_worker=16", "algo.rollout=32",
        "algo.batch_size=512", "train_until_avg_return=null", "logger.experiment_summaries_interval=5",
    ]),
    # Two of our players per duel (host + join, each a ViZDoom process): 2 workers x 8 matches.
    "doom_duel_2x8": (120_000, [
        "env=doom/duel", "hardware.num_workers=2", "hardware.num_envs_per_worker=8",
        "logger.experiment_summaries_interval=5",
    ]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cartpole_2x16")
    parser.add_argument("--policies", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=None, help="total frames (default: the preset's)")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    total, overrides = PRESETS[args.preset]
    total = args.env_steps or total
    work = Path(tempfile.mkdtemp(prefix="several_policies_"))
    results = {n: [] for n in args.policies}
    try:
        for rep in range(args.repeats):
            for n in args.policies:
                busy = wait_for_quiet(60)
                name = f"p{n}_r{rep}"
                cmd = train_py_command(sys.executable, [
                    *overrides, f"algo.num_policies={n}", f"train_for_env_steps={total // n}",
                    f"train_dir={work}", f"experiment={name}", "seed=" + str(rep)])
                run = run_tree(cmd, work / f"{name}.log", cwd=work, env=python_env())
                summary = read_summary(work / name)
                frames = summary.get("env_steps")
                steady = steady_fps(read_tb_scalars(work / name, "perf/env_steps"))
                row = {"frames": frames, "wall": run.wall_seconds,
                       "fps": frames / run.wall_seconds if frames and run.returncode == 0 else None,
                       "steady": steady, "rss": run.peak_rss_mb, "pss": run.peak_pss_mb,
                       "other": max(busy, run.other_cpu)}
                results[n].append(row)
                print(f"policies={n} repeat {rep}: frames {fmt(frames)}  wall {run.wall_seconds:.1f} s  "
                      f"FPS {fmt(row['fps'])}  steady {fmt(steady)}  peak RSS {run.peak_rss_mb:,.0f} MB  "
                      f"other CPU {row['other']:.2f} cores  exit {run.returncode}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = results[args.policies[0]]
    base_fps, base_steady = median(r["fps"] for r in base), median(r["steady"] for r in base)
    rows = []
    for n, runs in results.items():
        fps, steady = median(r["fps"] for r in runs), median(r["steady"] for r in runs)
        rows.append([f"{n} policies", fmt(median(r["frames"] for r in runs)), fmt(median(r["wall"] for r in runs),
                     ",.1f"), " / ".join(fmt(r["fps"]) for r in runs), fmt(fps), fmt(steady),
                     fmt(ratio(fps, base_fps), ".2f"), fmt(ratio(steady, base_steady), ".2f"),
                     fmt(median(r["rss"] for r in runs)), fmt(median(r["pss"] for r in runs))])
    print(f"\n{args.preset}: {total:,} total frames, medians of {args.repeats} runs")
    print_table(["", "frames", "wall s", "FPS (wall) per run", "FPS (wall)", "steady FPS", "ratio (wall)",
                 "ratio (steady)", "peak RSS MB", "peak PSS MB"], rows)


if __name__ == "__main__":
    main()
