"""Folder names for sweeps.

A sweep's folder must not depend on the clock: re-running the same sweep command has to land
in the same folders, so that every run resumes from its own last checkpoint. The CLI names the
sweep after its command line (`sweep_overrides`), and each run after the overrides that vary
between the sweep's runs (`job_dirname` of Hydra's `override_dirname`, with the fixed ones
excluded).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import List, Optional, Sequence

from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from sf_hydra.config.aliases import cores

MAX_NAME = 80
# Overrides that say where or how runs execute, not what they compute: never in names.
PLACEMENT_KEYS = ("train_dir", "sweep_name", "restart_behavior", "hydra/launcher", "hydra/sweeper")
# How long and how often, when equal for every run: a longer budget continues the same sweep.
BUDGET_KEYS = (
    "train_for_env_steps", "train_for_seconds", "train_until_avg_return", "save_every_sec", "keep_checkpoints",
)


def safe_name(text: str) -> str:
    """A folder-safe version of an override string (`env=doom/basic` -> `env=doom-basic`)."""
    text = re.sub(r"[/\\\s]+", "-", text)
    text = re.sub(r"[^A-Za-z0-9_.,=+\-\[\]()]", "_", text)
    if len(text) <= MAX_NAME:
        return text
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{text[:MAX_NAME - 9]}_{digest}"


def _is_placement(key: str) -> bool:
    return key in PLACEMENT_KEYS or key.startswith("hydra.")


def command_line_overrides(argv: Sequence[str]) -> List[str]:
    """The overrides of a command line, without Hydra's own options (`--cfg hydra`, `-m`)."""
    return list(get_args_parser().parse_known_args(list(argv))[0].overrides)


def with_overrides(argv: Sequence[str], extra: Sequence[str]) -> List[str]:
    """`argv` with `extra` overrides placed right after the user's own: Hydra's parser takes
    one run of overrides only (`-m a=1 --cfg hydra b=2` is refused)."""
    argv, given = list(argv), command_line_overrides(argv)
    at = max((i for i, a in enumerate(argv) if a in given), default=len(argv) - 1) + 1
    return argv[:at] + list(extra) + argv[at:]


def is_multirun(argv: Sequence[str]) -> bool:
    return bool(get_args_parser().parse_known_args(list(argv))[0].multirun)


def _is_budget(key: str) -> bool:
    return key in BUDGET_KEYS or key == "logger" or key.startswith("logger.")  # where scalars go (logger=wandb)


def sweep_overrides(argv: Sequence[str]) -> List[str]:
    """Extra overrides for a `--multirun` command line: the sweep's name (unless given) and
    which keys to leave out of each run's folder name (those equal in every run)."""
    parsed = OverridesParser.create().parse_overrides(command_line_overrides(argv))
    named = [o for o in parsed if not _is_placement(o.key_or_group)]
    extra = []
    if not any(o.key_or_group == "sweep_name" for o in parsed):
        # What varies, then the experiment: long names are cut, and that part tells sweeps apart.
        swept = sorted(o.input_line.lstrip("+~") for o in named if o.is_sweep_override())
        fixed = sorted((o.key_or_group != "experiments", o.input_line.lstrip("+~")) for o in named
                       if not o.is_sweep_override() and not _is_budget(o.key_or_group))
        fixed = [line for _, line in fixed]
        name = "__".join(swept + fixed) or "sweep"
        extra.append(f"sweep_name='{safe_name(name)}'")
    fixed = sorted({o.key_or_group for o in named if not o.is_sweep_override()} | set(PLACEMENT_KEYS))
    extra.append(f"hydra.job.config.override_dirname.exclude_keys=[{','.join(fixed)}]")
    return extra


def job_dirname(override_dirname: Optional[str]) -> str:
    """One run's folder inside the sweep: what varies between the sweep's runs."""
    return safe_name(override_dirname) if override_dirname else "run"


def sqlite_path(path: str) -> str:
    """An sqlite URL for a file whose folder may not exist yet (e.g. an Optuna study kept in
    the sweep's folder, opened before any run has made that folder)."""
    file = Path(path).absolute()
    file.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{file}"


def register_resolvers() -> None:
    for name, fn in (("sf_job_dirname", job_dirname), ("sf_sqlite_path", sqlite_path), ("sf_cores", cores)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
