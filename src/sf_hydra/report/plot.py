"""Draws one mean +- std curve per config."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import numpy as np

# Curves get the tab10 colours in order, so a reader (or a test) can tell them apart.
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]

Band = Tuple[np.ndarray, np.ndarray, np.ndarray]  # steps, mean, std


def plot_curves(bands: Dict[str, Band], seeds: Dict[str, int], out: Path, title: str, ylabel: str) -> Path:
    import matplotlib  # only to draw: reading runs (sf_hydra.report) stays light; the backend is set first

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen

    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    for i, (label, (steps, mean, std)) in enumerate(bands.items()):
        color = COLORS[i % len(COLORS)]
        ax.plot(steps, mean, color=color, linewidth=2, label=f"{label} ({seeds[label]} seeds)")
        ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel("env steps (frames)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out

