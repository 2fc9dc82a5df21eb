"""python -m sf_hydra.report.population <run dir or folder of runs> [--out population.png]

Draws a PBT population from the runs' `pbt/` histories: each policy's target objective at
each of its looks (top; a replacement is marked with the donor it took, "<-k"), and its
learning rate over its env steps (bottom). One run with algo.num_policies > 1 is one
population; runs of a `pbt.workspace` sweep are its members, each drawn as its member index.
Prints one line per replacement."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

from sf_hydra.report.plot import COLORS


def _jsonl(path: Path) -> List[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line being written
    return out


def pbt_folders(root: Path) -> List[Path]:
    """Every `pbt/` folder with an events file at or under `root`."""
    return sorted(p.parent for p in Path(root).rglob("pbt/events.jsonl"))


def read_population(root: Path):
    """(looks, rates): {policy: [(env steps, objective, donor or None)]} and {policy: [(env steps, learning rate)]}."""
    looks: Dict[int, list] = defaultdict(list)
    rates: Dict[int, list] = defaultdict(list)
    for folder in pbt_folders(root):
        for e in _jsonl(folder / "events.jsonl"):
            if e.get("objective") is not None:
                looks[int(e["policy"])].append((e["env_steps"], e["objective"], e.get("donor")))
        for path in folder.glob("hyperparams_*.jsonl"):
            k = int(path.stem.split("_")[-1])
            rates[k].extend((h["env_steps"], h["learning_rate"]) for h in _jsonl(path))
    return ({k: sorted(v, key=lambda t: t[0]) for k, v in looks.items()},
            {k: sorted(v, key=lambda t: t[0]) for k, v in rates.items()})


def plot_population(looks, rates, out: Path, title: str, objective: str) -> Path:
    import matplotlib  # only to draw, as in plot.py; the backend is set first

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), dpi=100, sharex=True, height_ratios=[2, 1])
    for k in sorted(set(looks) | set(rates)):
        color = COLORS[k % len(COLORS)]
        points = looks.get(k, [])
        if points:
            top.plot([p[0] for p in points], [p[1] for p in points], color=color, marker=".", label=f"policy {k}")
            for steps, value, donor in points:
                if donor is not None:
                    top.plot(steps, value, marker="x", markersize=10, color=color)
                    top.annotate(f"<-{donor}", (steps, value), textcoords="offset points", xytext=(4, 4),
                                 fontsize=7, color=color)
        if rates.get(k):
            xs, ys = zip(*rates[k])
            bottom.step(xs, ys, where="post", color=color)
    top.set_ylabel(objective)
    top.set_title(title)
    top.grid(alpha=0.3)
    top.legend(loc="best", fontsize=8)
    bottom.set_yscale("log")
    bottom.set_ylabel("learning rate")
    bottom.set_xlabel("the policy's env steps")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sf_hydra.report.population", description=__doc__.splitlines()[2])
    parser.add_argument("root", type=Path, help="a PBT run folder, or a folder of runs (a pbt.workspace sweep)")
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default <root>/population.png)")
    args = parser.parse_args(argv)
    folders = pbt_folders(args.root) if args.root.is_dir() else []
    if not folders:
        print(f"error: no PBT history (pbt/events.jsonl) under {args.root}", file=sys.stderr)
        return 2
    looks, rates = read_population(args.root)
    objective = next((e["target_objective"] for f in folders for e in _jsonl(f / "events.jsonl")), "objective")
    out = args.out or args.root / "population.png"
    plot_population(looks, rates, out, title=args.root.name, objective=objective)
    replaced = sorted((s, k, d, v) for k, pts in looks.items() for s, v, d in pts if d is not None)
    for steps, k, donor, value in replaced:
        print(f"policy {k} took policy {donor}'s weights at {steps} of its env steps (its objective was {value:.4g})")
    print(f"{len(replaced)} replacements; population: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
