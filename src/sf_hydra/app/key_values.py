"""The key=value arguments of the commands that are not Hydra apps (sf-export, sf-push, sf-pull), read the way
Hydra's commands take theirs: each key checked against the command's own before anything is loaded, a bad one
refused as a ConfigError naming the key, the value and what is allowed."""

from __future__ import annotations

import logging
import sys
from typing import Callable, Dict, List, Optional, Sequence

from sf_hydra.app.commands import COMMANDS, wants_help
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.faults import Fault

log = logging.getLogger("sf_hydra")


def run_command(command: Callable[[List[str]], None], argv: Optional[List[str]], prog: Optional[str] = None) -> int:
    """Runs `command` on the arguments (sys.argv's when None) and returns the exit status: 0; 2 for a bad key or
    value (ConfigError) or a run or file that is not there; a Fault's own status; each said in one log line.
    `--help` or `-h` prints command `prog`'s keys and examples (sf_hydra.app.commands) and runs nothing."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if prog is not None and wants_help(argv):
        print(COMMANDS[prog].help())
        return 0
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    try:
        command(argv)
    except ConfigError as e:
        log.error("bad config: %s", e)
        return 2
    except FileNotFoundError as e:
        log.error("%s", e)
        return 2
    except Fault as e:
        log.error("%s", e)
        return e.exit_code
    return 0


def parse_key_values(argv: Sequence[str], keys: Dict[str, Optional[str]], command: str) -> Dict[str, Optional[str]]:
    """{key: value} of `argv` over `keys`' defaults; an argument without '=' or a key `command` does not take is
    refused."""
    args: Dict[str, Optional[str]] = dict(keys)
    for item in argv:
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(item, None, f"key=value with a key of {command}: {', '.join(keys)}")
        if key not in keys:
            raise ConfigError(key, value, f"a key of {command}: {', '.join(keys)}")
        args[key] = value
    return args


def check_index(args: Dict[str, Optional[str]], key: str, what: str) -> None:
    if not str(args[key]).isdigit():
        raise ConfigError(key, args[key], f"{what}: 0, 1, ...")


def check_choice(args: Dict[str, Optional[str]], key: str, allowed: Dict[str, str]) -> None:
    """`allowed`: {value: what it means}."""
    if args[key] not in allowed:
        raise ConfigError(key, args[key], " or ".join(f"{v} ({meaning})" if meaning else v
                                                        for v, meaning in allowed.items()))


def check_one_of(args: Dict[str, Optional[str]], first: str, second: str, what: str) -> None:
    """Exactly one of the keys `first` and `second` is given (`what` says what each names)."""
    if bool(args[first]) == bool(args[second]):
        raise ConfigError(first, args[first], f"exactly one of {what}")


def listed(value: Optional[str]) -> List[str]:
    """A list argument as typed: `[a,b]`, `a,b` or `a` (None or empty: none)."""
    text = (value or "").strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [item.strip().strip("'\"") for item in text.split(",") if item.strip()]
