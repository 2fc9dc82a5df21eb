"""python -m sf_hydra.report <sweep dir> [--tag episode/return] [--out curves.png]   (installed: sf-report ...)

Writes a PNG of learning curves (mean +- std over seeds per config) and prints a table of
final scores (mean +- std over seeds of each run's last logged value)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np

from sf_hydra.report.curves import DEFAULT_TAG, mean_std, read_curve
from sf_hydra.report.plot import plot_curves
from sf_hydra.report.runs import find_runs, group_runs


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    prog = "sf-report" if Path(sys.argv[0]).name == "sf-report" else "python -m sf_hydra.report"  # console script
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[2])
    parser.add_argument("sweep_dir", type=Path,
                        help="a sweep folder (train_dir/multirun/<sweep>) or any folder of runs")
    parser.add_argument("--tag", default=DEFAULT_TAG, help=f"TensorBoard scalar to plot (default {DEFAULT_TAG})")
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default <sweep_dir>/curves.png)")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if not args.sweep_dir.is_dir():
        print(f"error: sweep_dir={args.sweep_dir} is not a folder", file=sys.stderr)
        return 2
    runs = find_runs(args.sweep_dir)
    if not runs:
        print(f"error: no runs (folders with tb/ event files) under {args.sweep_dir}", file=sys.stderr)
        return 2
    bands, seeds, rows = {}, {}, []
    for label, members in group_runs(runs).items():
        curves = [c for c in (read_curve(r.path, args.tag) for r in members) if c is not None]
        if not curves:
            print(f"warning: {label}: no run logged {args.tag!r} yet", file=sys.stderr)
            continue
        bands[label], seeds[label] = mean_std(curves), len(curves)
        finals = np.array([c.values[-1] for c in curves])
        steps = np.array([c.steps[-1] for c in curves])
        rows.append((label, len(curves), finals.mean(), finals.std(), int(steps.min()), int(steps.max())))
    if not bands:
        print(f"error: no run under {args.sweep_dir} logged {args.tag!r}", file=sys.stderr)
        return 1
    out = args.out or args.sweep_dir / "curves.png"
    plot_curves(bands, seeds, out, title=args.sweep_dir.name, ylabel=args.tag)
    print_table(rows, args.tag)
    print(f"\ncurves: {out}")
    return 0


def print_table(rows, tag: str) -> None:
    width = max(len("config"), *(len(r[0]) for r in rows))
    print(f"{'config':<{width}}  seeds  final {tag} (mean +- std)  env steps")
    for label, n, mean, std, lo, hi in rows:
        span = f"{lo}" if lo == hi else f"{lo}-{hi}"
        print(f"{label:<{width}}  {n:>5}  {mean:>12.2f} +- {std:<10.2f}  {span}")


if __name__ == "__main__":
    sys.exit(main())
