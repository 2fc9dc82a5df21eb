"""A run's Lightning loggers: TensorBoard (`logger.tensorboard`) and Weights & Biases
(`logger.with_wandb`), alone or both. The learner's Summaries callback sends the same
scalars to each of them.

W&B is optional in every way: a missing `wandb` package or a `wandb.init` that fails (no
login, a bad project name, no network) costs one warning line, and training goes on with
the other loggers. The W&B run's id is kept in `<run_dir>/wandb_id`, so that a resumed run
continues its W&B run; in a `--multirun` sweep the runs are grouped under the sweep's name
(unless `logger.wandb_group` is set). With WANDB_MODE=offline the run is written under
`<run_dir>/wandb/` for a later `wandb sync`.
"""

from __future__ import annotations

import logging
import sys
import uuid
from pathlib import Path
from typing import List, Optional

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from sf_hydra.core.files import write_atomically

log = logging.getLogger("sf_hydra")

WANDB_ID_FILE = "wandb_id"


def build_loggers(cfg, run_dir: Path, resuming: bool) -> list:
    """The Lightning loggers `cfg.logger` asks for; `resuming`: the run continues from a checkpoint."""
    loggers = []
    if cfg.logger.tensorboard:
        from lightning.pytorch.loggers import TensorBoardLogger  # Lightning: loaded after the workers start

        # flush_secs: the writer's own flush thread; Summaries also flushes on this interval (send_scalars)
        loggers.append(TensorBoardLogger(save_dir=str(run_dir), name="tb", version="",
                                         flush_secs=cfg.logger.flush_summaries_interval))
    if cfg.logger.with_wandb:
        wandb_logger = start_wandb(cfg, run_dir, resuming)
        if wandb_logger is not None:
            loggers.append(wandb_logger)
    return loggers


def in_sweep() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def wandb_group(cfg) -> Optional[str]:
    """`logger.wandb_group`, else in a --multirun sweep the sweep's name."""
    if cfg.logger.wandb_group:
        return cfg.logger.wandb_group
    return cfg.sweep_name if in_sweep() else None


def wandb_id(run_dir: Path, resuming: bool) -> str:
    """The run's W&B id: the saved one when training resumes, else a new one (also after
    restart_behavior=restart/overwrite, which leave no checkpoint to resume from)."""
    saved = run_dir / WANDB_ID_FILE
    if resuming and saved.is_file() and saved.read_text().strip():
        return saved.read_text().strip()
    return uuid.uuid4().hex[:12]  # W&B ids: letters and digits, unique within the project


def _warn(what: str, error: BaseException) -> None:
    first_line = (str(error).strip().splitlines() or [""])[0]
    log.warning("W&B is off for this run (%s: %s: %s); training goes on without it", what, type(error).__name__,
                first_line)


def start_wandb(cfg, run_dir: Path, resuming: bool):
    """A started Lightning WandbLogger, or None (with a warning) when W&B cannot run."""
    try:
        import wandb  # noqa: F401 (the optional `wandb` extra: its absence is a warning)
        from lightning.pytorch.loggers import WandbLogger  # Lightning: loaded after the workers start
    except ImportError as e:
        _warn("the wandb package is missing, pip install 'sf_hydra[wandb]'", e)
        return None
    try:
        run_id = wandb_id(run_dir, resuming)
        config = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
        wandb_logger = WandbLogger(
            name=run_dir.name, save_dir=str(run_dir), id=run_id, project=cfg.logger.wandb_project,
            entity=cfg.logger.wandb_user, group=wandb_group(cfg), job_type=cfg.logger.wandb_job_type,
            tags=list(cfg.logger.wandb_tags) or None, config=config,
        )
        # Lightning always passes wandb.init `anonymous=None`, which wandb >= 0.19 answers on every run with
        # "The anonymous setting has no effect": an argument left out is one wandb takes as not set.
        wandb_logger._wandb_init.pop("anonymous", None)
        wandb_logger.experiment  # noqa: B018 (wandb.init runs here, so that its failure is caught now)
    except Exception as e:  # wandb raises many kinds (UsageError, CommError, timeouts, ...)
        _warn("wandb.init failed", e)
        finish_wandb(failed=True)
        return None
    write_atomically(run_dir / WANDB_ID_FILE, lambda tmp: tmp.write_text(run_id + "\n"))
    log.info("W&B run %s (project %s%s) in %s", run_id, cfg.logger.wandb_project,
             f", group {wandb_group(cfg)}" if wandb_group(cfg) else "", run_dir / "wandb")
    return wandb_logger


def finish_wandb(failed: bool) -> None:
    """Closes this process's W&B run (flushing it to disk or the server), if one is open. A run
    that never imported wandb has none open: it is not imported just to ask (0.8 s here)."""
    wandb = sys.modules.get("wandb")
    if wandb is None or getattr(wandb, "run", None) is None:
        return
    try:
        wandb.finish(exit_code=1 if failed else 0)
        # finish() can return before W&B's service process wrote the run's last records (seen with
        # wandb 0.31 on a busy machine: an offline run file without its run record); teardown waits
        # for that process, so the run is whole on disk once training returns.
        wandb.teardown(exit_code=1 if failed else 0)
    except Exception as e:
        log.warning("W&B: closing the run failed (%s: %s)", type(e).__name__, e)


def log_videos(train_cfg, run_dir: Path, videos: List[str], scalars: dict) -> None:
    """enjoy.py: the episodes' videos (and its results) into the run's W&B run, when the run
    used W&B. Any failure is a warning: the videos are on disk either way."""
    saved = run_dir / WANDB_ID_FILE
    if not train_cfg.logger.with_wandb or not videos:
        return
    if not saved.is_file():
        log.warning("W&B: %s is missing (the run never reached W&B): the videos stay in %s", saved, run_dir / "enjoy")
        return
    try:
        import wandb  # the optional `wandb` extra

        lg = train_cfg.logger
        run = wandb.init(id=saved.read_text().strip(), resume="allow", dir=str(run_dir), project=lg.wandb_project,
                         entity=lg.wandb_user, group=lg.wandb_group or None, job_type=lg.wandb_job_type)
        run.log({**{f"enjoy/episode_{i:03d}": wandb.Video(v, format=Path(v).suffix[1:]) for i, v in enumerate(videos)},
                 **scalars})
        run.finish()
        wandb.teardown()  # the run whole on disk before enjoy returns (see finish_wandb)
    except Exception as e:
        log.warning("W&B: the videos stay in %s (%s: %s)", run_dir / "enjoy", type(e).__name__,
                    (str(e).strip().splitlines() or [""])[0])
