"""hardware.layout=auto against an exhaustive grid of layouts: is the probe's pick as fast as the best?

    python benchmarks/layout.py --quick -- env=gym/cartpole
    python benchmarks/layout.py -- env=doom/basic
    python benchmarks/layout.py --envs gym/cartpole doom/basic atari/pong --quick

For each env, every cell of the grid (workers x envs per worker x splits x inference placement; the
bounds follow this machine's cores: `grid`) is one `python train.py` run of --seconds of training
(train_for_seconds), no early stop. The pick is `python train.py ... hardware.layout=auto` with the same
budget, run --pick-runs times spread among the grid's runs (first, middle, last), so that a machine whose
load drifts hurts both alike; its layout is read back from the run's config.yaml and its probe's seconds
from the log line it prints.

FPS is steady training FPS: env frames between the first and the last `perf/fps` report with a non-zero
step count over the wall time between them (start-up, and the probe, left out). Printed per env: every
cell's FPS, the pick's median FPS and layout, the grid's best and the ratio pick / best.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

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
)

REPORT_SEC = 3
Cell = Tuple[int, int, int, str]  # workers, envs per worker, splits, inference placement
# env frames per env step cost more for these families: fewer envs per worker in their grid
HEAVY = ("doom/", "atari/")


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def grid(env: str, quick: bool) -> List[Cell]:
    """The layouts measured: workers 1, cores/2, cores, 2 x cores (quick: 1 and cores); envs per worker
    8/16/32 (Doom, Atari: 4/8/16; quick: the two larger); splits 1 and 2 acting in the worker, 2 with a
    server (a server's double buffering needs two splits; quick: in_worker 1 split, server 2 splits)."""
    c = cores()
    workers = sorted({1, c} if quick else {1, max(1, c // 2), c, 2 * c})
    envs = [4, 8, 16] if env.startswith(HEAVY) else [8, 16, 32]
    envs = envs[1:] if quick else envs
    placements = [(1, "in_worker"), (2, "server")] if quick else [(1, "in_worker"), (2, "in_worker"), (2, "server")]
    return [(w, e, s, p) for w in workers for e in envs for s, p in placements]


def parse_cell(text: str) -> Cell:
    """`2x8:2:server` -> (2, 8, 2, "server")."""
    size, splits, placement = text.split(":")
    workers, envs = size.lower().split("x")
    return int(workers), int(envs), int(splits), placement


def cell_overrides(cell: Cell) -> List[str]:
    w, e, s, p = cell
    return [f"hardware.num_workers={w}", f"hardware.num_envs_per_worker={e}", f"hardware.worker_num_splits={s}",
            f"hardware.inference={p}"]


def one_run(name: str, overrides: Sequence[str], seconds: float, work: Path, timeout: float):
    """(steady FPS, the run's folder, its log) of one train.py run; FPS None if it failed."""
    train_dir = work / "train"
    run = ["train_until_avg_return=null", "train_for_env_steps=10000000000", f"train_for_seconds={seconds}",
           f"logger.experiment_summaries_interval={REPORT_SEC}", "logger.progress=lines", *overrides,
           f"experiment={name}", f"train_dir={train_dir}", "restart_behavior=overwrite"]
    log = work / f"{name}.log"
    proc = run_tree(train_py_command(sys.executable, run), log, cwd=work, env=python_env(), timeout=timeout)
    run_dir = train_dir / name
    if proc.returncode != 0:
        print(f"    train.py failed (exit {proc.returncode}), log: {log}", flush=True)
        return None, run_dir, log
    fps = steady_fps(read_tb_scalars(run_dir, "perf/fps")) or read_summary(run_dir).get("fps")
    return fps, run_dir, log


def picked_cell(run_dir: Path) -> Optional[Cell]:
    """The layout a hardware.layout=auto run saved in its config.yaml."""
    try:
        hw = yaml.safe_load((run_dir / "config.yaml").read_text())["hardware"]
    except (OSError, KeyError, TypeError):
        return None
    return (hw["num_workers"], hw["num_envs_per_worker"], hw["worker_num_splits"], hw["inference"])


def probe_seconds(log: Path) -> Optional[float]:
    """The probe's seconds, from the line hardware.layout=auto prints."""
    found = re.search(r"hardware\.layout=auto: picked .*probe ([0-9.]+) s", log.read_text(errors="replace"))
    return float(found.group(1)) if found else None


def show(cell: Optional[Cell]) -> str:
    return "-" if cell is None else f"{cell[0]}x{cell[1]} s{cell[2]} {cell[3]}"


def bench_env(env: str, args, work: Path) -> dict:
    """Every grid cell once and the pick --pick-runs times among them; prints the env's table."""
    cells = [parse_cell(c) for c in args.cells] if args.cells else grid(env, args.quick)
    seconds = args.heavy_seconds if env.startswith(HEAVY) else args.seconds
    pick_at = {round(i * (len(cells) - 1) / max(1, args.pick_runs - 1)) for i in range(args.pick_runs)}
    fps: Dict[Cell, Optional[float]] = {}
    picks: List[Tuple[Optional[float], Optional[Cell], Optional[float]]] = []
    extra = [f"env={env}", *args.overrides]
    for i, cell in enumerate(cells):
        if i in pick_at:
            f, run_dir, log = one_run(f"pick_{i}", [*extra, "hardware.layout=auto"], seconds, work, args.timeout)
            picks.append((f, picked_cell(run_dir), probe_seconds(log)))
            print(f"  {env} pick: {show(picks[-1][1])} {fmt(f)} FPS (probe {fmt(picks[-1][2], '.1f')} s)", flush=True)
        fps[cell], _, _ = one_run(f"cell_{i}", [*extra, *cell_overrides(cell)], seconds, work, args.timeout)
        print(f"  {env} {show(cell)}: {fmt(fps[cell])} FPS", flush=True)
    best = max((c for c in cells if fps[c] is not None), key=lambda c: fps[c], default=None)
    confirm = []  # (pick's FPS, best cell's FPS) of alternating runs after the grid
    for i in range(args.confirm if best is not None else 0):
        f, run_dir, log = one_run(f"confirm_pick_{i}", [*extra, "hardware.layout=auto"], seconds, work, args.timeout)
        picks.append((f, picked_cell(run_dir), probe_seconds(log)))
        b, _, _ = one_run(f"confirm_best_{i}", [*extra, *cell_overrides(best)], seconds, work, args.timeout)
        confirm.append((f, b))
        print(f"  {env} confirm {i}: pick {show(picks[-1][1])} {fmt(f)} FPS, best {show(best)} {fmt(b)}", flush=True)
    pick_fps = median(f for f, _, _ in picks)
    chosen = sorted({show(c) for _, c, _ in picks})
    print(f"\n{env}: {len(cells)} layouts, {seconds:g} s of training each, {cores()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    print_table(["layout (workers x envs, splits, inference)", "FPS", "vs best"],
                [[show(c), fmt(fps[c]), fmt(ratio(fps[c], fps.get(best)), ".2f")] for c in cells]
                + [[f"pick: {', '.join(chosen)}", fmt(pick_fps), fmt(ratio(pick_fps, fps.get(best)), ".2f")]])
    # The picked layouts' own grid runs against the best: the layout's worth, apart from how the pick's runs (probe
    # included) met the machine's load.
    picked_in_grid = median(ratio(fps.get(c), fps.get(best)) for _, c, _ in picks if fps.get(c) is not None)
    if picked_in_grid is not None:
        print(f"the picked layouts' grid runs / the grid's best: median {fmt(picked_in_grid, '.2f')}")
    paired = median(ratio(f, b) for f, b in confirm)
    if confirm:
        print(f"alternating pairs after the grid, pick / {show(best)}: median ratio {fmt(paired, '.2f')} "
              f"({', '.join(fmt(ratio(f, b), '.2f') for f, b in confirm)})")
    return {"env": env, "best": best, "best_fps": fps.get(best), "pick": chosen, "pick_fps": pick_fps,
            "ratio": ratio(pick_fps, fps.get(best)), "paired": paired, "probe_s": median(p for _, _, p in picks),
            "picked_in_grid": picked_in_grid}


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["gym/cartpole"], help="env config names")
    parser.add_argument("--quick", action="store_true", help="a smaller grid (workers 1 and cores, 2 env counts)")
    parser.add_argument("--cells", nargs="+", default=None,
                        help="measure these layouts instead of the grid, as WORKERSxENVS:SPLITS:PLACEMENT")
    parser.add_argument("--seconds", type=float, default=20.0, help="training seconds per run")
    parser.add_argument("--heavy-seconds", type=float, default=40.0,
                        help="training seconds per run of Doom and Atari (their workers take ~10 s of it to start)")
    parser.add_argument("--confirm", type=int, default=2,
                        help="after the grid: pairs of runs, the pick then the grid's best, alternating")
    parser.add_argument("--pick-runs", type=int, default=3, help="hardware.layout=auto runs per env")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--work-dir", type=Path, default=None, help="keep logs and run folders here")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides after --, for every run")
    args = parser.parse_args(argv)
    env_override = [o for o in args.overrides if o.startswith("env=")]
    if env_override:
        args.envs = [o.split("=", 1)[1] for o in env_override]
        args.overrides = [o for o in args.overrides if not o.startswith("env=")]
    exit_cleanly_on_signals()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="sf_hydra_layout_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = [bench_env(env, args, work / env.replace("/", "_")) for env in args.envs]
        print("\nsummary (pick / grid's best steady FPS)")
        print_table(["env", "grid's best", "FPS", "pick", "FPS", "ratio", "paired ratio", "picked layouts in the grid",
                     "probe s"],
                    [[r["env"], show(r["best"]), fmt(r["best_fps"]), ", ".join(r["pick"]), fmt(r["pick_fps"]),
                      fmt(r["ratio"], ".2f"), fmt(r["paired"], ".2f"), fmt(r["picked_in_grid"], ".2f"),
                      fmt(r["probe_s"], ".1f")] for r in results])
    finally:
        time.sleep(0.1)
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
