"""Objects named in the config by a dotted path (`_target_`), built with Hydra's `instantiate`.

Every `_target_` node is used the same way: its other keys are bound (`_partial_`), and the
code that needs the object adds its run-time arguments (spaces, sizes, parameters) when it
calls the result. So a family, an encoder, an RNN core, an action head, the network class or
the optimizer of a user is a dotted path in the user's own yaml; nothing is registered.

User code is found on sys.path or under the current directory, which is appended to sys.path
once here (as `python -m` would). Worker processes start with a copy of the parent's sys.path
(sampler/mp.py), so what the main process resolved before starting them, they resolve too.

Invariant: a path that cannot be imported is a `ConfigError` naming the config key (e.g.
`env.factory._target_`) and the dotted path, never a raw Hydra traceback; `check_targets`
finds every such path in a config before any process starts.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterator, Tuple

from hydra._internal.utils import _locate  # what hydra.utils.get_object calls, without its error log line
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.extras import missing_extra

TARGET = "_target_"


def _search_current_directory() -> None:
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)


def locate(key: str, path: Any) -> Any:
    """The object at dotted `path`, which config key `key` names (ConfigError otherwise)."""
    _search_current_directory()
    try:
        obj = _locate(str(path))
    except Exception as e:  # noqa: BLE001  (an import error, or anything a module raises when imported)
        extra = missing_extra(e)
        if extra is not None:  # our own code, an optional package of which is not installed
            raise ConfigError(key, path, f"a dotted path whose packages are installed: {extra}") from None
        cause = " ".join(str(e).split())
        raise ConfigError(key, path, f"an importable dotted path (package.module.name) on sys.path or under the "
                                     f"current directory; importing it failed: {cause}") from None
    if not callable(obj):
        raise ConfigError(key, path, f"a dotted path to a class or a function (it names a {type(obj).__name__})")
    return obj


def bind(key: str, node) -> Callable:
    """`node`'s `_target_` with the node's other keys bound: call it with the run-time arguments.
    `key` is where the node sits in the config (`model.encoder`), for error messages."""
    if node is None or TARGET not in node:
        raise ConfigError(key, node, f"a node with a {TARGET} key (the dotted path of a class or function)")
    locate(f"{key}.{TARGET}", node[TARGET])
    return instantiate(node, _partial_=True)


def build(key: str, node, *args) -> Any:
    """`bind(key, node)(*args)`: the object the node describes, built with run-time arguments."""
    return bind(key, node)(*args)


def _target_keys(node, prefix: str) -> Iterator[Tuple[str, Any]]:
    for key, value in node.items():
        if key == TARGET:
            yield prefix + TARGET, value
        elif isinstance(value, dict):
            yield from _target_keys(value, f"{prefix}{key}.")


def check_targets(cfg) -> None:
    """Every `_target_` anywhere in `cfg` names an importable class or function."""
    tree = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    for key, path in _target_keys(tree, ""):
        locate(key, path)
