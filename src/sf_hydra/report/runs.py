"""Finds a sweep's runs and groups the seeds of each config."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

import yaml

# Overrides that never tell configs apart: seeds are averaged, the rest is placement.
IGNORED_KEYS = ("seed", "train_dir", "sweep_name", "restart_behavior", "hydra")


@dataclass
class Run:
    path: Path
    overrides: Tuple[str, ...]  # as given on the command line (Hydra's overrides.yaml)

    @property
    def name(self) -> str:
        return str(self.path.name)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _overrides(run_dir: Path) -> Tuple[str, ...]:
    """The run's own overrides; a run made without Hydra is named by its folder (`k=v,k=v`)."""
    saved = run_dir / ".hydra" / "overrides.yaml"
    items = yaml.safe_load(saved.read_text()) if saved.exists() else run_dir.name.split(",")
    return tuple(str(o) for o in items if not _key(str(o)).startswith(IGNORED_KEYS))


def find_runs(sweep_dir: Path) -> List[Run]:
    """Every folder under `sweep_dir` with TensorBoard files (`tb/`) is a run."""
    found = sorted({p.parent for p in Path(sweep_dir).rglob("tb") if p.is_dir()})
    return [Run(path, _overrides(path)) for path in found]


def group_runs(runs: List[Run]) -> "OrderedDict[str, List[Run]]":
    """Runs that differ only by seed form one group, labelled by what differs between groups."""
    common = set.intersection(*(set(r.overrides) for r in runs)) if runs else set()
    groups: Dict[str, List[Run]] = OrderedDict()
    for run in runs:
        label = ",".join(o for o in run.overrides if o not in common) or "all runs"
        groups.setdefault(label, []).append(run)
    return OrderedDict(sorted(groups.items()))
