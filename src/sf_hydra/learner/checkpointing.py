"""Checkpoints by wall time (Lightning's ModelCheckpoint ignores its time interval under manual
optimization): periodic ones (`checkpoint_<env steps>.ckpt`, the newest `keep_checkpoints` kept, and
`last.ckpt`: a hard link to the newest numbered one, not a second copy), milestones
(`milestones/checkpoint_<env steps>.ckpt`, every `save_milestones_sec`, never pruned) and each policy's best
(`best_p<k>.ckpt`, by `save_best_metric`). Every file goes through the one writer (sf_hydra.core.files): written
to a temporary name, flushed to the disk, renamed, the folder flushed; so a crash while saving never destroys the
previous checkpoint, and a crash of the machine after a save never leaves last.ckpt or its numbered file empty.
A save that fails (disk full, no permission) ends the run with CheckpointSaveError: the path and the cause, no
traceback. A repeated stop signal that lands during a save aborts the run only once the save is done
(core/signals.py `shielded`), and `newest_saved` says what is on disk when it does."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import lightning as L

from sf_hydra.core import signals
from sf_hydra.core.faults import CheckpointSaveError
from sf_hydra.core.files import link_atomically, write_atomically
from sf_hydra.core.metric_names import is_eval_metric, metric_value
from sf_hydra.core.run_dir import BEST_KEY, LAST, MILESTONES, SAVED_AT_KEY, best_checkpoint_name, read_best
from sf_hydra.learner import ddp

log = logging.getLogger("sf_hydra")
_COPYING: Set[Path] = set()  # checkpoint folders whose file system refused a hard link (last.ckpt is copied there)
_NEWEST: Optional[Tuple[Path, int, float]] = None  # this process's newest save: path, env steps, time.monotonic()


def newest_saved() -> str:
    """What this process saved last, for a run that stops without its final checkpoint."""
    if _NEWEST is None:
        return "no checkpoint was written by this session: a resume starts where this session started"
    path, steps, when = _NEWEST
    return (f"the newest learner state on disk is {path} ({steps} env steps, saved "
            f"{time.monotonic() - when:.0f} s ago), where a resume starts")


def save_atomically(trainer, path: Path) -> None:
    """The trainer's checkpoint at `path`, written atomically (sf_hydra.core.files); an OSError (disk full, no
    permission) becomes CheckpointSaveError naming `path`, and leaves no temporary file behind."""
    global _NEWEST
    with signals.shielded():  # a repeated stop signal aborts once the file is written, not halfway
        if not trainer.is_global_zero:  # data-parallel: rank 0 writes; this rank only takes part in the save
            trainer.save_checkpoint(path)
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, trainer.save_checkpoint)
        except OSError as e:
            raise CheckpointSaveError(path, e) from e
        _NEWEST = (path, int(trainer.lightning_module.env_steps), time.monotonic())


def link_last(numbered: Path, last: Path) -> None:
    """`last` names the same file as the just-written `numbered` (a hard link, replaced atomically): one
    write per save, and pruning `numbered` later leaves `last` whole (the file lives while a name does).
    Where the file system has no hard links, `last` becomes a copy of `numbered`'s bytes (atomically)."""
    try:
        link_atomically(numbered, last)
        return
    except OSError as e:
        if last.parent not in _COPYING:  # said once per folder
            _COPYING.add(last.parent)
            log.warning("could not hard-link %s to %s (%s): %s is written as a copy", last, numbered, e, last.name)
    try:
        write_atomically(last, lambda tmp: shutil.copyfile(numbered, tmp))
    except OSError as e:
        raise CheckpointSaveError(last, e) from e


class BestCheckpoint:
    """Each trained policy's best checkpoint, `best_p<k>.ckpt`: the whole learner state when policy k's
    `metric` (sf_hydra.core.metric_names, over its last logger.stats_avg episodes) was the highest yet,
    checked every `every_sec` and before every other save, once the policy has trained `after_env_steps`
    of its own env steps. The file records the metric, its value and the env steps (BEST_KEY), and the best
    value so far is read back from the files when a run resumes."""

    def __init__(self, directory: Path, metric: str, every_sec: float, after_env_steps: int):
        self.directory, self.metric = Path(directory), metric
        self.every_sec, self.after = every_sec, after_env_steps
        self.best: Dict[int, float] = {}  # policy -> the best value saved
        self.saving: Optional[dict] = None  # what the checkpoint being written records of itself
        self._last_check = time.monotonic()

    def start(self, num_policies: int) -> None:
        self._last_check = time.monotonic()
        self.best = {}
        for k in range(num_policies):
            info = read_best(self.directory / best_checkpoint_name(k))
            if info is None:
                continue
            if info.get("metric") == self.metric:
                self.best[k] = float(info["value"])
            else:
                log.warning("best checkpoint %s was chosen by %s=%s; save_best_metric=%s now: the next check "
                            "replaces it", best_checkpoint_name(k), info.get("metric"), info.get("value"), self.metric)

    def due(self, now: float) -> bool:
        return now - self._last_check >= self.every_sec

    def check(self, trainer, module) -> List[Path]:
        """Saves the best checkpoint of every policy whose metric beats its best so far; returns the paths.
        A metric of the evaluation (eval/*) is not in the policies' windows: `offer` brings its values."""
        self._last_check = time.monotonic()
        if is_eval_metric(self.metric):
            return []
        saved = []
        for k, stats in enumerate(module.stats):
            path = self._save_if_better(trainer, module, k, metric_value(stats, self.metric))
            if path is not None:
                saved.append(path)
        return saved

    def offer(self, trainer, module, policy: int, value: Optional[float], evaluated_env_steps: int,
              evaluated_weights: Optional[dict] = None, evaluated_version: Optional[int] = None) -> Optional[Path]:
        """An evaluation's `value` of this metric for `policy`, measured with its weights at the run's
        `evaluated_env_steps`: saved as its best checkpoint when it beats the best so far. The file holds the
        learner's state now (some updates later: the evaluation ran beside training), so a run can resume
        from it, and `evaluated_weights` (the policy's state_dict that was evaluated, version
        `evaluated_version`) under BEST_KEY, which enjoy.py plays. Returns the path, or None."""
        extra = {"evaluated_run_env_steps": evaluated_env_steps}
        if evaluated_weights is not None:
            extra.update(evaluated_weights=evaluated_weights, evaluated_policy_version=evaluated_version)
        return self._save_if_better(trainer, module, policy, value, extra)

    def _save_if_better(self, trainer, module, k: int, value: Optional[float], extra: Optional[dict] = None):
        stats = module.stats[k]
        if stats.env_steps < self.after or value is None or (k in self.best and value <= self.best[k]):
            return None
        path = self.directory / best_checkpoint_name(k)
        self.saving = {"policy": k, "metric": self.metric, "value": value, "env_steps": int(stats.env_steps),
                       "run_env_steps": int(module.env_steps), "policy_version": int(stats.version), **(extra or {})}
        try:
            save_atomically(trainer, path)
        finally:
            self.saving = None
        previous = self.best.get(k)
        self.best[k] = value
        log.info("new best checkpoint of policy %d: %s=%r at %d env steps (before: %s): %s", k, self.metric,
                 value, stats.env_steps, "none" if previous is None else repr(previous), path)
        return path


class PeriodicCheckpoint(L.Callback):
    """Every `every_sec`: `checkpoint_<env steps>.ckpt` (the newest `keep` are kept) and `last.ckpt`,
    which a resume starts from (that numbered file under a second name: link_last); every `milestones_sec`
    (> 0) a milestone in `milestones/`, never pruned; and, with `best`, each policy's best checkpoint (BestCheckpoint),
    checked every `best.every_sec` and before each of the other saves."""

    def __init__(self, directory: Path, every_sec: float, keep: int, milestones_sec: float = -1.0,
                 best: Optional[BestCheckpoint] = None):
        self.directory, self.every_sec, self.keep = Path(directory), every_sec, keep
        self.milestones_sec, self.best = milestones_sec, best
        self._last_save = self._last_milestone = time.monotonic()

    def on_train_start(self, trainer, pl_module):
        self._last_save = self._last_milestone = time.monotonic()
        if self.best is not None:
            self.best.start(len(pl_module.stats))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        with pl_module.profile.part("checkpoints"):
            self._save_when_due(trainer, pl_module)

    def _save_when_due(self, trainer, pl_module) -> None:
        now = time.monotonic()
        due = (self.best is not None and self.best.due(now), now - self._last_save >= self.every_sec,
               self.milestones_sec > 0 and now - self._last_milestone >= self.milestones_sec)
        best, periodic, milestone = [any(flags) for flags in zip(*ddp.gather(due))]  # data-parallel: due on any rank
        if best:
            self.best.check(trainer, pl_module)
        if periodic:
            self.save(trainer, pl_module.env_steps)
        if milestone:
            self.save_milestone(trainer, pl_module.env_steps)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        checkpoint[SAVED_AT_KEY] = time.time()  # a resume starts from the newest learner state (run_dir)
        if self.best is not None and self.best.saving is not None:
            checkpoint[BEST_KEY] = dict(self.best.saving)

    def _check_best(self, trainer) -> None:
        if self.best is not None:
            self.best.check(trainer, trainer.lightning_module)

    def save(self, trainer, env_steps: int) -> Path:
        with signals.shielded():  # an abort asked for meanwhile waits for last.ckpt too
            self._check_best(trainer)
            numbered = self.directory / f"checkpoint_{env_steps:012d}.ckpt"
            save_atomically(trainer, numbered)
            if trainer.is_global_zero:  # the files are rank 0's
                link_last(numbered, self.directory / LAST)
                self._prune()
            self._last_save = time.monotonic()
        return numbered

    def save_milestone(self, trainer, env_steps: int) -> Path:
        self._check_best(trainer)
        path = self.directory / MILESTONES / f"checkpoint_{env_steps:012d}.ckpt"
        save_atomically(trainer, path)
        self._last_milestone = time.monotonic()
        log.info("milestone checkpoint %s", path)
        return path

    def _prune(self) -> None:
        """The oldest numbered checkpoints beyond `keep`, by the time they were written (a run resumed from an
        earlier best checkpoint writes lower step numbers than the ones it left behind)."""
        def written(path: Path):
            try:
                return path.stat().st_mtime_ns, path.name
            except OSError:
                return 0, path.name

        numbered = sorted(self.directory.glob("checkpoint_*.ckpt"), key=written)
        for old in numbered[: max(0, len(numbered) - self.keep)]:
            old.unlink(missing_ok=True)
