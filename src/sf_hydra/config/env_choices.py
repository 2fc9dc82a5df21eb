"""Env configs are nested by family (`env=doom/basic`), and for a nested name Hydra's
"not found" error lists only the family folders. This check runs on the command line
first and lists every env config there is."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, List

from sf_hydra.config.errors import ConfigError


def env_configs(conf_dir: Path) -> List[str]:
    root = Path(conf_dir) / "env"
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def check_env_overrides(argv: Iterable[str], conf_dir: Path) -> None:
    """Raises ConfigError for `env=<name>` (or a multirun list) naming no config file."""
    known = env_configs(conf_dir)
    for arg in argv:
        if not arg.startswith("env="):
            continue
        for name in arg[len("env="):].split(","):
            if name and name not in known:
                families = sorted({k.split("/")[0] for k in known})
                raise ConfigError("env", name, f"one of {known} (families: {families}; any gymnasium id: env=gym/any env.id=<id>)")
