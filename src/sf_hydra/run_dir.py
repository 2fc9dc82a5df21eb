"""The run folder (`run_dir`: `${train_dir}/${experiment}`, or a run's folder in a sweep): what `restart_behavior`
does with an existing one, where checkpoints live, and which checkpoint a resume starts from."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Optional

LAST = "last.ckpt"


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


RUN_STATE = ("checkpoints", "tb", "config.yaml", "summary.json", "selfplay", "wandb", "wandb_id")


def prepare(run_dir: Path, restart_behavior: str) -> None:
    """resume: keep everything; restart: move the old run's state aside to
    `<name>_old_<time>/`; overwrite: delete it. Hydra's own files (.hydra, the log) stay,
    since Hydra has already opened them for this run."""
    run_dir.mkdir(parents=True, exist_ok=True)
    existing = [run_dir / name for name in RUN_STATE if (run_dir / name).exists()]
    if restart_behavior == "restart" and existing:
        aside = run_dir.with_name(f"{run_dir.name}_old_{time.strftime('%Y%m%d_%H%M%S')}")
        aside.mkdir(parents=True)
        for path in existing:
            shutil.move(str(path), str(aside / path.name))
    elif restart_behavior == "overwrite":
        for path in existing:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def resume_checkpoint(run_dir: Path) -> Optional[Path]:
    path = checkpoint_dir(run_dir) / LAST
    return path if path.exists() else None


def finished_summary(run_dir: Path, train_for_env_steps: int) -> Optional[dict]:
    """The saved summary of a run whose checkpoint already used its env-step budget, so that
    re-running a finished sweep leaves finished runs alone (a larger budget continues them)."""
    summary_path = run_dir / "summary.json"
    if resume_checkpoint(run_dir) is None or not summary_path.exists():
        return None
    summary = json.loads(summary_path.read_text())
    # Several policies: the budget is each policy's own env steps.
    steps = min(p.get("env_steps", 0) for p in summary.get("policies") or [summary])
    return summary if steps >= train_for_env_steps else None
