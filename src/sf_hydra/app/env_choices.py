"""Which `env=<name>` exist, checked on the command line before Hydra composes (not in
`config/`: the served Atari names come from the atari family's game table).

Env configs are nested by family (`env=doom/basic`), and for a nested name Hydra's
"not found" error lists only the family folders. This check runs on the command line
first and lists every env config there is: the yaml files of the config folders, and the
`atari/<game>` configs served from the game table (hydra_plugins/sf_hydra_plugins/atari_games.py)."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path
from typing import Iterable, List

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.extras import install_lines

SERVED_FAMILY = "atari"  # env=atari/<game> exists for every game of sf_hydra.envs.atari.games


def env_configs(conf_dir: Path) -> List[str]:
    """The env config files under `conf_dir` (served Atari games not included)."""
    root = Path(conf_dir) / "env"
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def extra_config_dirs(argv: Iterable[str]) -> List[Path]:
    """Config folders added on the command line (`--config-dir DIR`, `-cd DIR`, and
    `hydra.searchpath=[file://DIR,pkg://PACKAGE,...]`): a user's own env configs live there."""
    argv, dirs = list(argv), []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(argv[i + 1])
        elif arg.startswith("--config-dir="):
            dirs.append(arg.split("=", 1)[1])
        elif arg.lstrip("+").startswith("hydra.searchpath="):
            entries = [e.strip().strip("'\"") for e in arg.split("=", 1)[1].strip("[]").split(",")]
            dirs += [e[len("file://"):] for e in entries if e.startswith("file://")]
            dirs += [d for e in entries if e.startswith("pkg://") for d in [_package_dir(e[len("pkg://"):])] if d]
    return [Path(d) for d in dirs]


def _package_dir(name: str):
    """The folder of an importable package `a.b` (or `a/b`), None if there is none."""
    try:
        spec = importlib.util.find_spec(name.strip("/").replace("/", "."))
    except (ImportError, ValueError):
        return None
    return None if spec is None or not spec.submodule_search_locations else list(spec.submodule_search_locations)[0]


def _served_game(name: str) -> bool:
    family, _, game = name.partition("/")
    if family != SERVED_FAMILY:
        return False
    from sf_hydra.envs.atari.games import available_game_ids  # ale_py: only for an atari name

    return game in available_game_ids()


def _unknown(name: str, files: List[str]) -> ConfigError:
    """The near matches first (at most 10), then the configs of the named family (at most 10) and the families."""
    listed = [f for f in files if not f.startswith(SERVED_FAMILY + "/")]
    families = sorted({k.split("/")[0] for k in files} | {SERVED_FAMILY})
    atari = f"{SERVED_FAMILY}/<game> for every ALE game ale_py ships"
    if name.startswith(SERVED_FAMILY + "/"):
        from sf_hydra.envs.atari.games import available_game_ids, close_games  # ale_py: only for an atari name

        games = available_game_ids()
        close = close_games(name.partition("/")[2]) if games else []
        if close:
            hint = f"close matches: {[f'{SERVED_FAMILY}/{g}' for g in close]}"
        else:
            hint = f"{len(games)} games, e.g. atari/pong" if games else f"no ale_py: {install_lines('atari')}"
        return ConfigError("env", name, f"{atari} ({hint})")
    close = difflib.get_close_matches(name, listed, n=10, cutoff=0.6)
    family = [f for f in listed if f.split("/")[0] == name.split("/")[0]]
    parts = [f"close matches: {close}" if close else "no close match"]
    if family and set(family) - set(close):
        more = f" (+{len(family) - 10} more in conf/env/{name.split('/')[0]}/)" if len(family) > 10 else ""
        parts.append(f"in {name.split('/')[0]}/: {family[:10]}{more}")
    parts.append(f"families: {families}; any gymnasium id: env=gym/any env.id=<id>; {atari}")
    return ConfigError("env", name, "an env config; " + "; ".join(parts))


def check_env_overrides(argv: Iterable[str], conf_dir: Path) -> None:
    """Raises ConfigError for `env=<name>` (or a multirun list) naming no env config."""
    argv = list(argv)
    files = sorted({name for d in [conf_dir, *extra_config_dirs(argv)] for name in env_configs(d)})
    for arg in argv:
        if not arg.startswith("env="):
            continue
        for name in arg[len("env="):].split(","):
            if name and name not in files and not _served_game(name):
                raise _unknown(name, files)
