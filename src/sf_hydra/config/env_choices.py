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


def extra_config_dirs(argv: Iterable[str]) -> List[Path]:
    """Config folders added on the command line (`--config-dir DIR`, `-cd DIR`, and
    `hydra.searchpath=[file://DIR,...]`): a user's own env configs live there."""
    argv, dirs = list(argv), []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(argv[i + 1])
        elif arg.startswith("--config-dir="):
            dirs.append(arg.split("=", 1)[1])
        elif arg.lstrip("+").startswith("hydra.searchpath="):
            entries = arg.split("=", 1)[1].strip("[]").split(",")
            dirs += [e.strip().strip("'\"")[len("file://"):] for e in entries if e.strip().strip("'\"").startswith("file://")]
    return [Path(d) for d in dirs]


def check_env_overrides(argv: Iterable[str], conf_dir: Path) -> None:
    """Raises ConfigError for `env=<name>` (or a multirun list) naming no config file."""
    argv = list(argv)
    known = sorted({name for d in [conf_dir, *extra_config_dirs(argv)] for name in env_configs(d)})
    for arg in argv:
        if not arg.startswith("env="):
            continue
        for name in arg[len("env="):].split(","):
            if name and name not in known:
                families = sorted({k.split("/")[0] for k in known})
                raise ConfigError("env", name, f"one of {known} (families: {families}; any gymnasium id: env=gym/any env.id=<id>)")
