"""Does the way envs are given to policies change what each policy learns? algo.policy_assignment=fixed against
per_episode, the same several-policy run to the same target, seed by seed.

    python benchmarks/policy_assignment.py --seeds 6
    python benchmarks/policy_assignment.py --seeds 4 --target 195 -- env=gym/cartpole hardware.num_envs_per_worker=8

Each run is `python train.py <preset> algo.num_policies=2 algo.policy_assignment=<mode> seed=<s>
train_until_avg_return=<target>`: it stops when every policy's last `logger.stats_avg` episodes average the
target, or at the budget. The modes alternate within a seed (fixed, per_episode; the next seed the other way
round), so the machine's drift hits both alike. Printed per run: the run's env steps at the stop, each policy's
own env steps and last average return, the wall seconds and steady FPS; then per mode the medians and the rank sum
of the run's env steps over both modes' runs (equal learning: rank sums near equal).
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
    read_summary,
    read_tb_scalars,
    run_tree,
    steady_fps,
    train_py_command,
)

PRESET = ["env=gym/cartpole", "hardware.num_workers=2", "hardware.num_envs_per_worker=16", "algo.rollout=32",
          "algo.batch_size=512", "logger.stats_avg=50", "logger.experiment_summaries_interval=5"]
MODES = ("fixed", "per_episode")


def run_once(mode: str, seed: int, args, work: Path) -> dict:
    name = f"{mode}_s{seed}"
    cmd = train_py_command(sys.executable, [
        *PRESET, *args.overrides, f"algo.num_policies={args.policies}", f"algo.policy_assignment={mode}",
        f"train_until_avg_return={args.target}", f"train_for_env_steps={args.budget}", f"seed={seed}",
        f"train_dir={work}", f"experiment={name}"])
    run = run_tree(cmd, work / f"{name}.log", cwd=work, env=python_env())
    summary = read_summary(work / name)
    policies = summary.get("policies", [])
    return {"mode": mode, "seed": seed, "exit": run.returncode, "env_steps": summary.get("env_steps"),
            "own": [p.get("env_steps") for p in policies], "returns": [p.get("avg_return") for p in policies],
            "stop": summary.get("stop_reason"), "wall": run.wall_seconds,
            "steady": steady_fps(read_tb_scalars(work / name, "perf/env_steps"))}


def rank_sums(runs) -> dict:
    """Each mode's sum of ranks of its runs' env steps among all runs (1: fewest; ties share their mean rank)."""
    values = sorted(r["env_steps"] for r in runs)
    rank = {v: sum(i + 1 for i, w in enumerate(values) if w == v) / values.count(v) for v in set(values)}
    return {m: sum(rank[r["env_steps"]] for r in runs if r["mode"] == m) for m in MODES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--policies", type=int, default=2)
    parser.add_argument("--target", type=float, default=450.0, help="train_until_avg_return, every policy")
    parser.add_argument("--budget", type=int, default=2_000_000, help="train_for_env_steps (each policy's own)")
    parser.add_argument("overrides", nargs="*", help="more train.py overrides for every run (after --)")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    work = Path(tempfile.mkdtemp(prefix="policy_assignment_"))
    runs = []
    try:
        for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                r = run_once(mode, seed, args, work)
                runs.append(r)
                print(f"{mode}, seed {seed}: env steps {fmt(r['env_steps'])} (own: "
                      f"{' / '.join(fmt(s) for s in r['own'])}), last average return "
                      f"{' / '.join(fmt(x, '.1f') for x in r['returns'])}, stop {r['stop']}, wall {r['wall']:.1f} s, "
                      f"steady FPS {fmt(r['steady'])}, exit {r['exit']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done = [r for r in runs if r["exit"] == 0 and r["env_steps"]]
    sums = rank_sums(done) if done else {}
    rows = []
    for mode in MODES:
        mine = [r for r in done if r["mode"] == mode]
        rows.append([mode, " / ".join(fmt(r["env_steps"]) for r in mine), fmt(median(r["env_steps"] for r in mine)),
                     fmt(median(s for r in mine for s in r["own"])),
                     str(sum(not str(r["stop"]).startswith("train_until_avg_return") for r in mine)),
                     fmt(median(r["wall"] for r in mine), ".1f"), fmt(median(r["steady"] for r in mine)),
                     fmt(sums.get(mode), ".1f")])
    print(f"\n{args.policies} policies to {args.target:g} (every policy), seeds {args.first_seed}.."
          f"{args.first_seed + args.seeds - 1}")
    print_table(["mode", "run's env steps per seed", "median", "median own steps per policy",
                 "runs that did not reach it", "wall s", "steady FPS", "rank sum (steps)"], rows)


if __name__ == "__main__":
    main()
