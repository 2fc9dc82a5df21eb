"""The Lightning parts of a run, built from config nodes with Hydra's `instantiate`: the Trainer
(`trainer`, conf/trainer/), the callbacks (`callbacks`, conf/callbacks/) and the loggers a user adds
(`logger.extra`, appended to TensorBoard and W&B, which sf_hydra.app.loggers builds from the logger keys).

A callback or logger of one's own is a node in YAML, no code: `{_target_: <dotted path>, <its
arguments>}` under `callbacks.<name>` or `logger.extra.<name>`. A node without `_target_` is skipped
(with a warning); a node whose `_enabled_` key is false is skipped (the key is ours: the target never
sees it), which is how the default nodes that depend on other keys (the opponent pool, PBT) turn on.

Invariants:
- Every `_target_` of these nodes is checked before any process starts (`check_parts`, from
  sf_hydra.app.train.check_config), with the message shape of sf_hydra.core.targets. The check reads the
  module's source instead of importing it where the module is not imported yet: importing Lightning
  costs seconds, and train.py imports it while the rollout workers start, not before
  (sf_hydra.app.cli, train.launch_sampler). What the source cannot tell (a module-level `__getattr__`, a
  star import, a compiled module) is left to the build.
- Building refuses what is not a Callback / Logger / Trainer, and a target that fails to build (a
  wrong argument), as a ConfigError naming the node's `_target_` key.
- This module imports nothing heavy (Lightning, Hydra's instantiate) until something is built.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import logging
import sys
from typing import Any, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf, open_dict

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.targets import TARGET, _search_current_directory, locate

log = logging.getLogger("sf_hydra")

ENABLED = "_enabled_"
# The config keys of nodes built here: (key, whether it holds named nodes rather than being one).
PARTS = (("trainer", False), ("callbacks", True), ("logger.extra", True))


# -- before any process starts -------------------------------------------------------------------
def _names_bound(body, names: set, stars: list) -> None:
    """Adds the names a module body binds at its top level (also inside if/try/with blocks) to `names`,
    and the modules it star-imports (`from m import *`, as (module, level)) to `stars`."""
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            stars.extend((node.module or "", node.level) for a in node.names if a.name == "*")
            names.update(a.asname or a.name for a in node.names if a.name != "*")
        for block in ("body", "orelse", "finalbody"):
            _names_bound(getattr(node, block, []), names, stars)
        for handler in getattr(node, "handlers", []):
            _names_bound(handler.body, names, stars)


def _find_spec(name: str, locations):
    """The spec of submodule `name` inside its parent's `locations`, found without running any module."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        try:
            spec = find(name, locations) if find is not None else None
        except Exception:  # noqa: BLE001  (a finder that cannot answer for this name)
            spec = None
        if spec is not None:
            return spec
    return None


def _longest_module(parts: List[str]):
    """(spec, n): the spec of the longest module `parts[:n]` names, found without running any module;
    (None, 0) when not even `parts[0]` is a module."""
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level module: found, not run
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None, 0
    depth = 1
    while depth < len(parts) and spec.submodule_search_locations is not None:
        child = _find_spec(".".join(parts[:depth + 1]), list(spec.submodule_search_locations))
        if child is None:
            break
        spec, depth = child, depth + 1
    return spec, depth


def _binds(spec, name: str, hops: int = 3) -> Optional[bool]:
    """Whether the module of `spec` binds `name` at its top level, read from its source (following its star
    imports `hops` deep); None when the source cannot tell."""
    if spec.origin in (None, "namespace"):
        return False  # a namespace package: submodules only
    if not spec.origin.endswith(".py") or hops == 0:
        return None  # compiled or built in
    try:
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read(), spec.origin)
    except (OSError, SyntaxError, ValueError):
        return None  # the import will say what is wrong with it
    names, stars = set(), []
    _names_bound(tree.body, names, stars)
    if name in names:
        return True
    if "__getattr__" in names:
        return None
    package = spec.name if spec.submodule_search_locations is not None else spec.name.rpartition(".")[0]
    for module, level in stars:
        if level:
            base = package.split(".")
            module = ".".join(base[:len(base) - level + 1] + ([module] if module else []))
        star, depth = _longest_module(module.split("."))
        if star is None or depth < len(module.split(".")):
            continue  # not there: an import behind a guard (`if os.path.isfile(...)`), or one that fails anyway
        found = _binds(star, name, hops - 1)
        if found is not False:
            return found
    return False


def missing_without_import(path: str) -> Optional[str]:
    """Why dotted `path` cannot name an object, read from the modules' files without running them; None
    when it can, or when the files cannot tell (see the module docstring)."""
    parts = str(path).split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        return None  # not a module path the files can speak for: sf_hydra.core.targets.locate decides
    spec, depth = _longest_module(parts)
    if spec is None:
        return f"No module named '{parts[0]}'"
    module = ".".join(parts[:depth])
    if depth == len(parts):
        return f"'{path}' is a module, not a class or a function"
    if _binds(spec, parts[depth]) is not False:
        return None
    if spec.submodule_search_locations is not None and depth < len(parts) - 1:
        return f"No module named '{module}.{parts[depth]}'"
    return f"module '{module}' has no attribute '{parts[depth]}'"


def check_target(key: str, path: Any) -> None:
    """ConfigError (sf_hydra.core.targets' message) when dotted `path` at config key `key` cannot be imported.
    A module imported already is asked; any other is read from its file (Lightning stays unimported)."""
    _search_current_directory()
    module = str(path).rpartition(".")[0]
    if module in sys.modules:
        locate(key, path)
        return
    problem = missing_without_import(path)
    if problem is not None:
        raise ConfigError(key, path, "an importable dotted path (package.module.name) on sys.path or under the "
                                     f"current directory; importing it failed: {problem}")


def _targets(node, prefix: str):
    """(key, dotted path) of each `_target_` that instantiate builds from `node`: its own and, unless its
    `_recursive_` is false, its nested nodes' (a group passed whole, as `logger: ${logger}`, is not built)."""
    recursive = node.get("_recursive_", True) is not False
    for key, value in node.items():
        if key == TARGET:
            yield prefix + TARGET, value
        elif isinstance(value, dict) and recursive:
            yield from _targets(value, f"{prefix}{key}.")


def check_parts(cfg: DictConfig) -> None:
    """Before any process starts: the trainer node and each enabled callback and extra logger node is a
    mapping, its `_enabled_` a boolean, and every `_target_` in it importable (`check_target`)."""
    for key, named in PARTS:
        value = OmegaConf.select(cfg, key)
        if value is None:
            continue
        tree = OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value
        if not isinstance(tree, dict):
            raise ConfigError(key, tree, "a mapping of named nodes, each {_target_: <dotted path>, <arguments>}"
                              if named else "a node {_target_: <dotted path>, <arguments>}")
        for node_key, node in ([(f"{key}.{k}", v) for k, v in tree.items()] if named else [(key, tree)]):
            if not isinstance(node, dict):
                raise ConfigError(node_key, node, "a node {_target_: <dotted path of the class>, <its arguments>}")
            if not isinstance(node.get(ENABLED, True), bool):
                raise ConfigError(f"{node_key}.{ENABLED}", node[ENABLED], "true or false")
            if node.get(ENABLED, True):
                for target_key, path in _targets(node, f"{node_key}."):
                    check_target(target_key, path)


# -- building ------------------------------------------------------------------------------------
def _build(key: str, node: DictConfig, **runtime) -> Any:
    """`node` built with Hydra's instantiate (its `_enabled_` key left out), plus `runtime` arguments."""
    # Hydra's instantiate only when something is built: checking the nodes (check_parts) stays light
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    if ENABLED in node:
        parent = node._get_parent()
        node = copy.deepcopy(node)
        node._set_parent(parent)  # interpolations (${run_dir}) resolve against the whole config, as before
        with open_dict(node):
            node.pop(ENABLED)
    target = node[TARGET]
    locate(f"{key}.{TARGET}", target)  # the import, here at the latest: sf_hydra.core.targets' message
    try:
        return instantiate(node, **runtime)
    except InstantiationException as e:
        cause = e.__cause__ if e.__cause__ is not None else e
        text = " ".join(str(cause).split())
        raise ConfigError(f"{key}.{TARGET}", target, f"a class whose arguments are the node's keys; building it "
                                                     f"failed: {type(cause).__name__}: {text}") from None


def enabled_nodes(node: Optional[DictConfig], key: str) -> List[Tuple[str, DictConfig]]:
    """[(config key, node)] of `node`'s named entries that are built: those with a `_target_` whose
    `_enabled_` is not false, in the config's order."""
    if node is None:
        return []
    out = []
    for name in node:
        child = node[name]
        if not isinstance(child, DictConfig) or TARGET not in child:
            log.warning("%s.%s has no %s: skipped", key, name, TARGET)
            continue
        if child.get(ENABLED, True):
            out.append((f"{key}.{name}", child))
    return out


def _built_as(key: str, node: DictConfig, kind: type, what: str):
    obj = _build(key, node)
    if not isinstance(obj, kind):
        raise ConfigError(f"{key}.{TARGET}", node[TARGET], f"{what} (it built a {type(obj).__name__})")
    return obj


def instantiate_callbacks(node: Optional[DictConfig], key: str = "callbacks") -> list:
    """The Lightning callbacks of `node` ({name: {_target_, ...}}), built in order."""
    from lightning.pytorch import Callback  # Lightning: loaded after the workers start

    return [_built_as(k, child, Callback, "a lightning.pytorch.Callback")
            for k, child in enabled_nodes(node, key)]


def instantiate_loggers(node: Optional[DictConfig], key: str = "logger.extra") -> list:
    """The Lightning loggers of `node` ({name: {_target_, ...}}), built in order."""
    from lightning.pytorch.loggers import Logger  # Lightning: loaded after the workers start

    return [_built_as(k, child, Logger, "a lightning.pytorch.loggers.Logger")
            for k, child in enabled_nodes(node, key)]


def instantiate_trainer(node: DictConfig, key: str = "trainer", **runtime):
    """The Trainer `node` describes, with `runtime` arguments (the loggers and callbacks) added."""
    from lightning.pytorch import Trainer  # Lightning: loaded after the workers start

    trainer = _build(key, node, **runtime)
    if not isinstance(trainer, Trainer):
        raise ConfigError(f"{key}.{TARGET}", node[TARGET],
                          f"a lightning.pytorch.Trainer (it built a {type(trainer).__name__})")
    return trainer


def without_parts(cfg) -> dict:
    """`cfg` as a container without the nodes of PARTS (check_parts checks those)."""
    tree = OmegaConf.to_container(cfg, resolve=True)
    for key, _ in PARTS:
        *parents, leaf = key.split(".")
        node = tree
        for name in parents:
            node = node.get(name) or {}
        node.pop(leaf, None)
    return tree
