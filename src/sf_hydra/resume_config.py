"""A resumed run keeps the config it was trained with.

A run folder holds the run's resolved config (`config.yaml`, written when a session starts). When the
folder also holds a checkpoint and the run resumes (`restart_behavior=resume`), the saved config is the
base: the newly composed config may differ from it only in keys that say how long, where to report and
on what to run, never in what is trained. Those keys (RESUMABLE) take their new values; any other
difference is refused before any process starts, with a ConfigError naming the key and both values
(`restart_behavior=restart` or `overwrite` starts the experiment anew instead).

- The run's place (`run_dir`, `train_dir`, `experiment`, `sweep_name`) is not compared: a run folder
  may be moved or copied, and a sweep run's folder comes from its sweep.
- `seed` is compared: a different seed is a different experiment (a seed sweep gives each seed its own
  folder); a Slurm requeue or a re-run sweep composes the same config and passes.
- A key that the saved config lacks because it was saved by an older sf_hydra (a schema field added
  since) takes its default; a schema field that no longer exists is ignored. Under a plain dict node
  (`env.kwargs`, a part's own arguments) a key added or removed is a difference like any other.

Light on purpose (no torch): `train.py`'s command-line check calls it before Hydra writes into the folder.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

from omegaconf import DictConfig, OmegaConf

from sf_hydra.config.errors import ConfigError
from sf_hydra.faults import Fault

log = logging.getLogger("sf_hydra")

CONFIG = "config.yaml"
# Where the run lives, not what it computes.
PLACE = ("run_dir", "train_dir", "experiment", "sweep_name")
# Keys a resume may change (a trailing '.' is a whole group): budgets, reporting, hardware, checkpoints.
RESUMABLE = (
    "train_for_env_steps", "train_for_seconds", "train_until_avg_return", "logger.", "hardware.",
    "save_every_sec", "keep_checkpoints", "save_milestones_sec", "save_best_every_sec", "save_best_metric",
    "save_best_after", "load_checkpoint_kind", "restart_behavior",
    # Lightning's Trainer and the callbacks: how the run is driven, saved and reported (what they do to
    # training comes from keys compared above: pbt.*, selfplay.*); their paths follow the run folder.
    "trainer.", "callbacks.",
    "eval.",  # evaluation during training reads the weights; it changes nothing of training
)
_ABSENT = object()


def resumable(key: str) -> bool:
    return key in PLACE or any(key == k or (k.endswith(".") and key.startswith(k)) for k in RESUMABLE)


def has_run_to_resume(run_dir: Path) -> bool:
    """A saved config and at least one checkpoint file (without loading it)."""
    folder = Path(run_dir) / "checkpoints"
    return (Path(run_dir) / CONFIG).is_file() and folder.is_dir() and any(folder.glob("*.ckpt"))


def _leaves(node, prefix: str = "") -> Dict[str, Any]:
    """{dotted key: value} of a plain container; lists and empty dicts are leaves."""
    out: Dict[str, Any] = {}
    for key, value in node.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_leaves(value, full + "."))
        else:
            out[full] = value
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, bool) != isinstance(b, bool):  # True == 1 in Python, not in a config
        return False
    return a == b


def _typed_parent(cfg: DictConfig, key: str) -> bool:
    """Whether `key`'s parent node in `cfg` is a schema dataclass (its keys are the schema's fields)."""
    parent = key.rpartition(".")[0]
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return isinstance(node, DictConfig) and dataclasses.is_dataclass(OmegaConf.get_type(node))


def _interpolated(cfg: DictConfig, key: str) -> bool:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    try:
        return isinstance(node, DictConfig) and OmegaConf.is_interpolation(node, leaf)
    except Exception:
        return False


def config_differences(cfg: DictConfig, saved: DictConfig) -> Tuple[List[tuple], List[tuple], List[str]]:
    """(refused, accepted, ignored): (key, new value, saved value) of each difference of `cfg` from `saved`
    (keys in `cfg`'s order, refused ones with the keys users set first: interpolated ones last); ignored: keys
    of `saved` that the schema no longer has, or that `cfg` adds with their defaults."""
    new = _leaves(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    old = _leaves(OmegaConf.to_container(saved, resolve=True, enum_to_str=True))
    refused, accepted, ignored = [], [], []
    for key in list(new) + [k for k in old if k not in new]:
        before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if before is not _ABSENT and after is not _ABSENT and _same(before, after):
            continue
        if resumable(key):
            accepted.append((key, after, before))
        elif before is _ABSENT and _typed_parent(cfg, key):
            ignored.append(key)  # a schema field added since the run was saved: its default
        elif after is _ABSENT and OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT and _typed_parent(cfg, key):
            ignored.append(key)  # a schema field that no longer exists
        else:
            refused.append((key, after, before))
    refused.sort(key=lambda d: _interpolated(cfg, d[0]))  # stable: algo.learning_rate before algo.optimizer.lr
    return refused, accepted, ignored


def _shown(value) -> Any:
    return "<absent>" if value is _ABSENT else value


def check_resume_config(cfg: DictConfig, run_dir: Path) -> None:
    """ConfigError when `cfg` would resume the run in `run_dir` with a config that differs from its saved
    one beyond RESUMABLE keys. Nothing to check for a new run, restart/overwrite, or a folder without a
    checkpoint (that run starts anew and saves its config)."""
    run_dir = Path(run_dir)
    if str(cfg.restart_behavior) != "resume" or not has_run_to_resume(run_dir):
        return
    try:
        saved = OmegaConf.load(run_dir / CONFIG)
    except Exception as e:  # not yaml, or not a mapping: say so rather than resume blind
        raise Fault(f"the saved config {run_dir / CONFIG} of the run to resume cannot be read ({type(e).__name__}: "
                    f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}); restart_behavior=restart (moves "
                    "the old run aside) or restart_behavior=overwrite starts anew") from None
    if not isinstance(saved, DictConfig):
        raise Fault(f"the saved config {run_dir / CONFIG} of the run to resume is not a mapping; "
                    "restart_behavior=restart or restart_behavior=overwrite starts anew")
    refused, accepted, ignored = config_differences(cfg, saved)
    if refused:
        key, after, before = refused[0]
        others = "; ".join(f"{k}={_shown(a)!r} (saved: {_shown(b)!r})" for k, a, b in refused[1:6])
        more = f" (+{len(refused) - 6} more)" if len(refused) > 6 else ""
        raise ConfigError(key, _shown(after), (
            f"{_shown(before)!r}, as saved in {run_dir / CONFIG} for the run this command resumes. A resumed run "
            "keeps its config; only budgets (train_for_env_steps, train_for_seconds, train_until_avg_return), "
            "logger.*, hardware.*, trainer.*, callbacks.*, eval.*, save_*, keep_checkpoints and "
            "load_checkpoint_kind may change. "
            "restart_behavior=restart (moves the old run aside) or restart_behavior=overwrite (deletes it) starts "
            "anew with this config" + (f". Also different: {others}{more}" if others else "")))
    changed = [f"{k}: {_shown(b)!r} -> {_shown(a)!r}" for k, a, b in accepted if k.split(".")[0] not in PLACE]
    if changed:
        log.info("resuming %s with its saved config; changed: %s", run_dir, ", ".join(changed))
    if ignored:
        log.info("keys not in the saved config (an older or newer sf_hydra saved it): %s", ", ".join(ignored))


def save_config(cfg: DictConfig, run_dir: Path) -> Path:
    """`config.yaml` (resolved), written to a temporary name and renamed (never half written)."""
    path = Path(run_dir) / CONFIG
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    os.replace(tmp, path)
    return path
