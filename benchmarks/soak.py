"""Soak test: long runs, watching what a leak would show, the whole process tree's memory
and open files over time.

    python benchmarks/soak.py --minutes 10                  # CartPole, then Doom basic
    python benchmarks/soak.py --minutes 10 --runs cartpole

Each run is `python train.py <preset> train_for_seconds=<minutes * 60>` (no early stop, no
env-step budget).
Every --interval seconds (30) the tree (learner, rollout workers, env processes) is sampled:
RSS and PSS summed over its processes, open file descriptors summed, process count. Printed:
the samples, then per run (least-squares slope of PSS over the window, its range, and) the first
sample taken after the warm-up (--warmup, 60 s: start-up
allocations are not a leak) against the last one with the whole tree still up, as growth in MB (and MB per 10 minutes)
and in file descriptors. A leak grows steadily; noise goes up and down.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    exit_cleanly_on_signals,
    kill_tree,
    print_table,
    python_env,
    read_summary,
    train_py_command,
    tree_processes,
)

PRESETS = {
    "cartpole": ["env=gym/cartpole", "hardware.num_workers=2", "hardware.num_envs_per_worker=16",
                 "train_until_avg_return=null", "algo.rollout=32", "algo.batch_size=512"],
    "doom_basic": ["env=doom/basic", "hardware.num_workers=2", "hardware.num_envs_per_worker=8"],
}


def sample(root: int) -> dict:
    rss = pss = fds = 0
    procs = tree_processes(root)
    for p in procs.values():
        try:
            mem = p.memory_full_info()
            rss, pss = rss + mem.rss, pss + getattr(mem, "pss", mem.rss)
            fds += p.num_fds()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return {"rss_mb": rss / 2**20, "pss_mb": pss / 2**20, "fds": fds, "procs": len(procs)}


def soak(name: str, minutes: float, interval: float, work: Path) -> list:
    cmd = train_py_command(sys.executable, [*PRESETS[name], f"train_for_seconds={minutes * 60:g}",
                                            "train_for_env_steps=10000000000000",  # the env files' budgets off
                                            f"train_dir={work}", f"experiment={name}", "logger.log_interval_sec=30"])
    with open(work / f"{name}.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=work, env=python_env(),
                                start_new_session=True)
        start, samples, seen = time.time(), [], {}
        try:
            while proc.poll() is None:
                seen.update(tree_processes(proc.pid))
                point = {"t": time.time() - start, **sample(proc.pid)}
                samples.append(point)
                print(f"{name}: t={point['t']:6.0f} s  RSS {point['rss_mb']:8,.0f} MB  PSS {point['pss_mb']:8,.0f} MB  "
                      f"fds {point['fds']:5d}  processes {point['procs']}", flush=True)
                deadline = time.time() + interval
                while proc.poll() is None and time.time() < deadline:
                    time.sleep(0.5)
        finally:
            kill_tree(proc.pid, seen)
            proc.wait()
    summary = read_summary(work / name)
    print(f"{name}: exit {proc.returncode}, {summary.get('env_steps', 0):,} env steps, "
          f"stop: {summary.get('stop_reason')}", flush=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=60.0)
    parser.add_argument("--runs", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    args = parser.parse_args()
    exit_cleanly_on_signals()
    work = Path(tempfile.mkdtemp(prefix="soak_"))
    rows = []
    try:
        for name in args.runs:
            samples = [s for s in soak(name, args.minutes, args.interval, work) if s["procs"] > 0]
            # The window: after the warm-up, with the whole tree up (not the exit's last sample).
            running = [s for s in samples if s["t"] >= args.warmup] or samples
            steady = [s for s in running if s["procs"] == max(r["procs"] for r in running)]
            first, last = steady[0], steady[-1]
            span_min = max((last["t"] - first["t"]) / 60.0, 1e-9)
            window = f"{first['t']:.0f}-{last['t']:.0f} s"
            slope = _slope([(p["t"], p["pss_mb"]) for p in steady]) * 600.0
            rows.append([name, window, f"{first['pss_mb']:,.0f} -> {last['pss_mb']:,.0f}",
                         f"{last['pss_mb'] - first['pss_mb']:+,.1f}",
                         f"{(last['pss_mb'] - first['pss_mb']) / span_min * 10:+,.1f}", f"{slope:+,.1f}",
                         f"{min(p['pss_mb'] for p in steady):,.0f}-{max(p['pss_mb'] for p in steady):,.0f}",
                         f"{first['rss_mb']:,.0f} -> {last['rss_mb']:,.0f}", f"{first['fds']} -> {last['fds']}",
                         f"{max(s['pss_mb'] for s in steady):,.0f}"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print_table(["run", "window", "PSS MB", "PSS growth MB", "per 10 min", "fit per 10 min", "PSS range MB", "RSS MB",
                 "open fds", "peak PSS MB"], rows)


def _slope(points) -> float:
    """Least-squares slope (MB per second) of (t, MB) points: steadier than first vs last."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t, mean_v = sum(t for t, _ in points) / n, sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var if var else 0.0


if __name__ == "__main__":
    main()
