"""Where the policy should act: in each rollout worker or in a batched inference server
(hardware.inference=in_worker|server), over a grid of workers x envs per worker.

    python benchmarks/inference_placement.py --repeats 3 --env-steps 200000 \\
        --grid 2x8 2x16 2x32 -- env=gym/cartpole
    python benchmarks/inference_placement.py --repeats 3 --env-steps 100000 \\
        --grid 2x8 2x16 -- env=doom/basic

Each cell runs `python train.py <overrides> hardware.num_workers=W hardware.num_envs_per_worker=E`
once per placement and repeat, placements alternating (in_worker, server, in_worker, ...) so
that a busy machine hurts both alike. Both placements use worker_num_splits=2 (the server's
double buffering needs two splits; in a worker, splits only shrink its batches, so the
in_worker figure with its default of 1 split is printed too). The same network, batch and
passes per sample on both sides; no early stop (train_until_avg_return=null).

Printed per cell: median training FPS (env frames between the first and the last perf/fps
report over the time between them, start-up left out), median wall seconds of the whole run
(start-up included), and server / in_worker. `--benchmark` runs train.py's benchmark mode
instead (sampling only, no learning): the sampler's ceiling for each placement.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

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

PLACEMENTS = {
    "in_worker (1 split)": ["hardware.inference=in_worker", "hardware.worker_num_splits=1"],
    "in_worker (2 splits)": ["hardware.inference=in_worker", "hardware.worker_num_splits=2"],
    "server (2 splits)": ["hardware.inference=server", "hardware.worker_num_splits=2"],
}
REPORT_SEC = 5


def one_run(overrides: Sequence[str], env_steps: int, seed: int, work: Path, timeout: float,
            benchmark: bool) -> Tuple[Optional[float], Optional[float]]:
    """(steady FPS, wall seconds) of one train.py run; (None, None) if it failed."""
    train_dir = work / "train"
    run_overrides = ["train_until_avg_return=null", f"logger.experiment_summaries_interval={REPORT_SEC}",
                     "logger.progress=lines", *overrides, f"experiment=placement_{seed}",
                     f"train_dir={train_dir}", f"seed={seed}", f"train_for_env_steps={env_steps}",
                     "restart_behavior=overwrite", *(["benchmark=true"] if benchmark else [])]
    log = work / f"run_{seed}.log"
    proc = run_tree(train_py_command(sys.executable, run_overrides), log, cwd=work, env=python_env(),
                    timeout=timeout)
    if proc.returncode != 0:
        print(f"    train.py failed (exit {proc.returncode}), log: {log}", flush=True)
        return None, None
    run_dir = train_dir / f"placement_{seed}"
    fps = steady_fps(read_tb_scalars(run_dir, "perf/fps")) or read_summary(run_dir).get("fps")
    return fps, proc.wall_seconds


def parse_cell(text: str) -> Tuple[int, int]:
    workers, envs = text.lower().split("x")
    return int(workers), int(envs)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=200_000)
    parser.add_argument("--grid", nargs="+", default=["2x8", "2x16", "2x32"], help="WORKERSxENVS cells")
    parser.add_argument("--placements", nargs="+", default=list(PLACEMENTS), choices=list(PLACEMENTS))
    parser.add_argument("--benchmark", action="store_true", help="train.py benchmark=true: sampling only")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides after --, e.g. env=doom/basic")
    args = parser.parse_args(argv)
    exit_cleanly_on_signals()
    work = Path(tempfile.mkdtemp(prefix="sf_hydra_placement_"))
    results: Dict[Tuple[str, str], List[Tuple[Optional[float], Optional[float]]]] = {}
    try:
        for cell in args.grid:
            workers, envs = parse_cell(cell)
            for r in range(args.repeats):
                for name in args.placements:
                    wait_for_quiet(30.0)
                    overrides = [*args.overrides, f"hardware.num_workers={workers}",
                                 f"hardware.num_envs_per_worker={envs}", *PLACEMENTS[name]]
                    fps, wall = one_run(overrides, args.env_steps, args.seed + r, work, args.timeout,
                                        args.benchmark)
                    results.setdefault((cell, name), []).append((fps, wall))
                    print(f"  {cell} {name} run {r}: {fmt(fps)} FPS, wall {fmt(wall, '.1f')} s", flush=True)
        what = "sampling only (benchmark=true)" if args.benchmark else "training"
        print(f"\n{what}, {args.env_steps:,} env frames, overrides {' '.join(args.overrides) or '(none)'}, "
              f"median of {args.repeats} alternating runs")
        rows = []
        for cell in args.grid:
            base = median(f for f, _ in results.get((cell, args.placements[0]), []))
            for name in args.placements:
                runs = results.get((cell, name), [])
                fps, wall = median(f for f, _ in runs), median(w for _, w in runs)
                rows.append([cell, name, fmt(fps), fmt(wall, ".1f"), fmt(ratio(fps, base), ".2f")])
        print_table(["workers x envs", "placement", "FPS", "wall s", f"vs {args.placements[0]}"], rows)
    finally:
        time.sleep(0.1)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
