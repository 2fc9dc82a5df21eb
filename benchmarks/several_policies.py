"""What several policies cost: the same total work trained with algo.num_policies = 1, 2, 4.

    python benchmarks/several_policies.py --preset cartpole_2x16 --policies 1 2 --repeats 3
    python benchmarks/several_policies.py --preset doom_duel_2x8 --policies 1 2 4 --repeats 3
    python benchmarks/several_policies.py --preset doom_basic_2x8 --policies 1 2 --repeats 3 --env-steps 100000
    python benchmarks/several_policies.py --policies 1 2 --repeats 3 --baseline 32f2e09
    python benchmarks/several_policies.py --policies 2 --quiet-wait 0 -- algo.num_batches_to_accumulate=4

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
- CPU ms / kframe: CPU seconds (user + system) per 1,000 frames, start-up included, of the learner's
  process (train.py), of the rollout workers (the rest of the tree's Python processes) and of the env
  engines (the tree's processes that run no Python, such as ViZDoom's): on a shared machine this moves
  far less than any wall-clock figure;
- waits: the share of the session the learner waited for data, and of the workers' time they
  waited for free slots (summary.json's profile);
- ratio: FPS (wall) and steady FPS against the same system's runs of the first policy count;
- per run (printed as it ends): each policy's last average return (summary.json), the learning side
  of the same budget per policy.

`--baseline REV` adds sf_hydra as of git revision REV (a temporary worktree), each of its runs
right after ours of the same policy count and seed; `-- key=value ...` adds overrides to every run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    exit_cleanly_on_signals,
    fmt,
    median,
    print_table,
    python_env,
    ratio,
    read_summary,
    read_tb_scalars,
    revision_checkout,
    run_tree,
    steady_fps,
    train_py_command,
    wait_for_quiet,
)

PRESETS = {
    # The vs_sample_factory.py CartPole preset: MLP 64x64, batch 512, one pass per sample.
    "cartpole_2x16": (400_000, [
        "env=gym/cartpole", "hardware.num_workers=2", "hardware.num_envs_per_worker=16", "algo.rollout=32",
        "algo.batch_size=512", "algo.num_batches_per_epoch=2", "algo.num_epochs=2",  # as before the tuned defaults
        "train_until_avg_return=null", "logger.experiment_summaries_interval=5",
    ]),
    # The vs_sample_factory.py Doom basic preset: conv + GRU, batch 1024 of rollouts of 32, 2 workers x 8 envs.
    "doom_basic_2x8": (300_000, [
        "env=doom/basic", "hardware.num_workers=2", "hardware.num_envs_per_worker=8", "algo.batch_size=1024",
        "algo.num_batches_per_epoch=1", "algo.rollout=32", "logger.experiment_summaries_interval=5",
    ]),
    # Two of our players per duel (host + join, each a ViZDoom process): 2 workers x 8 matches.
    "doom_duel_2x8": (120_000, [
        "env=doom/duel", "hardware.num_workers=2", "hardware.num_envs_per_worker=8",
        "logger.experiment_summaries_interval=5",
    ]),
}


def per_kframe(cpu_seconds: float, frames) -> float | None:
    """CPU milliseconds per 1,000 frames (None without frames)."""
    return 1e6 * cpu_seconds / frames if frames else None


def run_once(repo: Path, overrides, n: int, env_steps: int, work: Path, name: str, seed: int, quiet: float) -> dict:
    """One train.py run of `repo` with `n` policies: the figures of one table row."""
    busy = wait_for_quiet(quiet)
    cmd = train_py_command(sys.executable, [
        *overrides, f"algo.num_policies={n}", f"train_for_env_steps={env_steps}",
        f"train_dir={work}", f"experiment={name}", f"seed={seed}"], repo)
    run = run_tree(cmd, work / f"{name}.log", cwd=work, env=python_env(repo=repo))
    summary = read_summary(work / name)
    frames = summary.get("env_steps")
    returns = [p.get("avg_return") for p in summary.get("policies", [])] or [summary.get("avg_return")]
    return {**waits(summary.get("profile", {})), "frames": frames, "wall": run.wall_seconds, "returns": returns,
            "fps": frames / run.wall_seconds if frames and run.returncode == 0 else None,
            "steady": steady_fps(read_tb_scalars(work / name, "perf/env_steps")),
            "rss": run.peak_rss_mb, "pss": run.peak_pss_mb, "other": max(busy, run.other_cpu),
            "learner_cpu": per_kframe(run.root_cpu_seconds, frames),
            "workers_cpu": per_kframe(run.cpu_seconds - run.root_cpu_seconds - run.engine_cpu_seconds, frames),
            "engines_cpu": per_kframe(run.engine_cpu_seconds, frames), "exit": run.returncode}


def waits(profile: dict) -> dict:
    """The share of the session the learner waited for data, and of the workers' time they waited for
    free slots (summary.json's profile; wall clock, so the machine's load moves them too)."""
    learner, workers = profile.get("learner", {}), profile.get("workers", {})
    return {"learner_wait": learner.get("wait_for_data", {}).get("fraction"),
            "slots_wait": workers.get("wait_for_slots", {}).get("fraction")}


def print_run(label: str, row: dict) -> None:
    print(f"{label}: frames {fmt(row['frames'])}  wall {row['wall']:.1f} s  FPS {fmt(row['fps'])}  "
          f"steady {fmt(row['steady'])}  peak RSS {row['rss']:,.0f} MB  "
          f"CPU ms/kframe learner {fmt(row['learner_cpu'], '.1f')} workers {fmt(row['workers_cpu'], '.1f')} "
          f"env engines {fmt(row['engines_cpu'], '.1f')}  "
          f"waits: learner {fmt(row['learner_wait'], '.0%')} workers for slots {fmt(row['slots_wait'], '.0%')}  "
          f"last average return per policy {' / '.join(fmt(r, '.1f') for r in row['returns'])}  "
          f"other CPU {row['other']:.2f} cores  exit {row['exit']}", flush=True)


def print_results(title: str, results: dict, policies) -> None:
    """Per (system, policy count): medians; ratios against the same system's first policy count."""
    rows = []
    for (system, n), runs in results.items():
        base = results[(system, policies[0])]
        base_fps, base_steady = median(r["fps"] for r in base), median(r["steady"] for r in base)
        fps, steady = median(r["fps"] for r in runs), median(r["steady"] for r in runs)
        rows.append([f"{system}, {n} policies", fmt(median(r["frames"] for r in runs)),
                     fmt(median(r["wall"] for r in runs), ",.1f"), " / ".join(fmt(r["fps"]) for r in runs), fmt(fps),
                     " / ".join(fmt(r["steady"]) for r in runs), fmt(steady),
                     fmt(ratio(fps, base_fps), ".2f"), fmt(ratio(steady, base_steady), ".2f"),
                     fmt(median(r["rss"] for r in runs)), fmt(median(r["pss"] for r in runs)),
                     fmt(median(r["learner_cpu"] for r in runs), ".1f"),
                     fmt(median(r["workers_cpu"] for r in runs), ".1f"),
                     fmt(median(r["engines_cpu"] for r in runs), ".1f"),
                     fmt(median(r["learner_wait"] for r in runs), ".0%"),
                     fmt(median(r["slots_wait"] for r in runs), ".0%")])
    print(title)
    print_table(["", "frames", "wall s", "FPS (wall) per run", "FPS (wall)", "steady FPS per run", "steady FPS",
                 "ratio (wall)", "ratio (steady)", "peak RSS MB", "peak PSS MB",
                 "learner CPU ms/kframe", "workers CPU ms/kframe", "env engines CPU ms/kframe",
                 "learner waits", "workers wait for slots"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cartpole_2x16")
    parser.add_argument("--policies", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=None, help="total frames (default: the preset's)")
    parser.add_argument("--quiet-wait", type=float, default=60.0,
                        help="seconds to wait at most, before each run, for the machine's other processes to calm")
    parser.add_argument("--baseline", metavar="REV", default=None,
                        help="also run sf_hydra as of git revision REV (a temporary worktree), alternating with ours")
    parser.add_argument("overrides", nargs="*", help="more train.py overrides for every run (after --)")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    total, overrides = PRESETS[args.preset]
    total = args.env_steps or total
    work = Path(tempfile.mkdtemp(prefix="several_policies_"))
    try:
        with revision_checkout(args.baseline, work / "baseline") as base_repo:
            systems = [("ours", REPO)] + ([(f"base {args.baseline}", base_repo)] if base_repo else [])
            results = {(system, n): [] for system, _ in systems for n in args.policies}
            for rep in range(args.repeats):
                for n in args.policies:
                    for k, (system, repo) in enumerate(systems):
                        row = run_once(repo, [*overrides, *args.overrides], n, total // n, work, f"s{k}_p{n}_r{rep}",
                                       rep, args.quiet_wait)
                        results[(system, n)].append(row)
                        print_run(f"{system}, policies={n}, repeat {rep}", row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_results(f"\n{args.preset}: {total:,} total frames, medians of {args.repeats} runs", results, args.policies)


if __name__ == "__main__":
    main()
