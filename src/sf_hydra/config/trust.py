"""Which code a saved config may call: code comes from the user, a saved run is data.

A config names code in three ways: a `_target_` (a dotted path Hydra's instantiate imports and calls, at any
depth, inside lists too), an env id of the form `module:Id` (gymnasium imports the module) and a resolver
interpolation such as `${oc.env:NAME}` (which reads the environment). A config the user composes now (their conf,
their command line) names their own code. A config read from a run folder (enjoy, export, `Policy.load`, a
resume, a pull, an import) may have come from anywhere, so before anything is imported or called each of its
references must be one of:

- sf_hydra's own part for the place it sits in (ROLES: a network part under `model`, an env family under
  `env.factory`, an optimizer class under `algo.optimizer`, Lightning's Trainer, a Lightning callback or logger, or
  any target the shipped conf and schema name for that place); the object found must live in the module its path
  names and be of the place's kind, so a path that walks through a module's imports to something else is refused;
- one the user trusts: `trusted_targets=[mylab.envs, ...]` (a module prefix or an exact path) or the environment
  variable SF_HYDRA_TRUSTED_TARGETS (comma-separated), never read from a saved config;
- one named by the config the user composed now (a resume: its command line names its own modules);
- one this user's own training recorded: `trust.json` in the run folder lists the run's references, sealed with
  the user's key (sf_hydra.core.seal), so the user's runs with their own env or model load with no flag, while a
  folder from elsewhere (its trust.json does not verify) does not.

Anything else is refused before any import, with one ConfigError naming the key, the reference, and how to trust
it. `trust.json` is never pushed: sf-push copies a fixed list of files.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.seal import seal, verify
from sf_hydra.core.targets import TARGET, locate

TRUSTED_ENV = "SF_HYDRA_TRUSTED_TARGETS"
TRUST_FILE = "trust.json"
SEAL_PURPOSE = "sf_hydra run references v1"
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
RESOLVER = re.compile(r"\$\{\s*([A-Za-z_][\w.]*)\s*:\s*([^}]*)\}")
# Resolvers of sf_hydra's own that compute from the config alone (names of folders, optimizer classes, tests).
OWN_RESOLVERS = frozenset({"sf_optimizer", "sf_gt", "sf_or", "sf_job_dirname"})


@dataclass(frozen=True)
class Role:
    """A place in the config where sf_hydra instantiates a target, and what may be called there."""

    where: str  # the key path: the node itself and everything below it
    modules: Tuple[str, ...]  # packages the called object must be defined in
    bases: Tuple[str, ...]  # a class must have one of these (module.qualname) in its MRO
    functions: bool  # whether a function of `modules` may be called there too
    what: str  # said in the refusal


ROLES = (
    Role("model", ("sf_hydra.models",), ("torch.nn.modules.module.Module",), True, "a network part of sf_hydra.models"),
    Role("env.factory", ("sf_hydra.envs",), ("sf_hydra.envs.family.EnvFamily",), False,
         "an env family of sf_hydra.envs"),
    Role("algo.optimizer", ("torch.optim", "sf_hydra.learner"), ("torch.optim.optimizer.Optimizer",), False,
         "an optimizer class (torch.optim)"),
    Role("trainer", ("lightning.pytorch.trainer", "pytorch_lightning.trainer"),
         ("lightning.pytorch.trainer.trainer.Trainer", "pytorch_lightning.trainer.trainer.Trainer"), False,
         "Lightning's Trainer"),
    Role("callbacks", ("lightning.pytorch.callbacks", "pytorch_lightning.callbacks"),
         ("lightning.pytorch.callbacks.callback.Callback", "pytorch_lightning.callbacks.callback.Callback"), False,
         "sf_hydra's callbacks or a Lightning callback"),
    Role("logger", ("lightning.pytorch.loggers", "pytorch_lightning.loggers"),
         ("lightning.pytorch.loggers.logger.Logger", "lightning.fabric.loggers.logger.Logger",
          "pytorch_lightning.loggers.logger.Logger"), False, "a Lightning logger"),
)
ELSEWHERE = Role("", (), (), False, "nothing: sf_hydra instantiates no target there")


@dataclass(frozen=True)
class Reference:
    """One piece of code a config names: where (`key`), how (`kind`: target, env module, resolver) and what."""

    key: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


# -- what a config names ---------------------------------------------------------------------------------------------
def _plain(cfg) -> Any:
    if isinstance(cfg, (DictConfig, ListConfig)):
        return OmegaConf.to_container(cfg, resolve=False)
    return cfg


def _walk(node, prefix: str) -> Iterator[Tuple[str, Any, Any]]:
    """(key path, key, value) of every entry of a plain tree, dicts and lists alike: a node's own entries before
    those of the nodes inside it (a part's `_target_` is met before its arguments')."""
    items = list(node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ())
    for key, value in items:
        yield f"{prefix}{key}", key, value
    for key, value in items:
        if isinstance(value, (dict, list)):
            yield from _walk(value, f"{prefix}{key}.")


def references(cfg) -> List[Reference]:
    """Every piece of code `cfg` names: its `_target_`s, the module of an env id 'module:Id', and the resolvers
    its strings interpolate that are not sf_hydra's own."""
    out = []
    for path, key, value in _walk(_plain(cfg), ""):
        if key == TARGET:
            out.append(Reference(path.rpartition(".")[0] or path, "target", value if isinstance(value, str)
                                 else repr(value)))
        elif path == "env.id" and isinstance(value, str) and ":" in value:
            out.append(Reference(path, "module", value.split(":", 1)[0]))
        if isinstance(value, str):
            for name, argument in RESOLVER.findall(value):
                if name not in OWN_RESOLVERS:
                    out.append(Reference(path, "resolver", f"{name}:{argument.strip()}"))
    return out


# -- what the project itself names -----------------------------------------------------------------------------------
def role_of(key: str) -> Role:
    return next((r for r in ROLES if key == r.where or key.startswith(r.where + ".")), ELSEWHERE)


def _conf_dir() -> Path:
    import sf_hydra_conf

    return Path(next(iter(sf_hydra_conf.__path__)))


def _package(path: Path, folder: Path, text: str) -> str:
    """Where a conf file's keys land: its `# @package` line (`_global_`: the root), else its group's folder."""
    found = re.search(r"^#\s*@package\s+(\S+)", text, re.M)
    if found:
        return "" if found.group(1) == "_global_" else found.group(1)
    parts = path.relative_to(folder).parts
    return parts[0] if len(parts) > 1 else ""


def _yaml_targets(folder: Path) -> Iterator[Tuple[str, str]]:
    """(key path in the composed config, target) of every `_target_` in the shipped conf files."""
    for path in sorted(folder.rglob("*.yaml")):
        text = path.read_text()
        try:
            tree = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        group = _package(path, folder, text)
        for key_path, key, value in _walk(tree if isinstance(tree, dict) else {}, ""):
            if key == TARGET and isinstance(value, str):
                node = key_path.rpartition(".")[0]
                yield (f"{group}.{node}" if group and node else group or node), value


@lru_cache(maxsize=1)
def shipped() -> FrozenSet[Tuple[str, str]]:
    """(role, target) of every target sf_hydra ships: the conf files' and the schema defaults'."""
    from sf_hydra.config.choices import OPTIMIZER_TARGETS
    from sf_hydra.config.schema import TrainConfig

    pairs: Set[Tuple[str, str]] = {(role_of(k).where, t) for k, t in _yaml_targets(_conf_dir())}
    defaults = {f.name: f.default_factory() for f in dataclasses.fields(TrainConfig)
                if f.default_factory is not dataclasses.MISSING}
    plain = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for k, v in defaults.items()}
    pairs |= {(role_of(r.key).where, r.name) for r in references(plain) if r.kind == "target"}
    pairs |= {("algo.optimizer", t) for t in OPTIMIZER_TARGETS.values()}
    return frozenset(p for p in pairs if p[0])


# -- what the user trusts --------------------------------------------------------------------------------------------
def user_trusted(trusted: Optional[Iterable[str]] = None, key: str = "trusted_targets") -> Tuple[str, ...]:
    """The dotted prefixes the user trusts: `trusted` (their command line or call) and SF_HYDRA_TRUSTED_TARGETS.
    Each must be a dotted path (ConfigError otherwise)."""
    given = [str(t).strip() for t in (trusted or [])]
    from_env = [t.strip() for t in os.environ.get(TRUSTED_ENV, "").split(",") if t.strip()]
    for where, items in ((key, given), (TRUSTED_ENV, from_env)):
        for item in items:
            if not DOTTED.match(item):
                raise ConfigError(where, item, "dotted module or object paths (mylab.envs, mylab.models.MyNet)")
    return tuple(given + from_env)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _defined_in(obj) -> Optional[str]:
    """`module.qualname` of a class or function (None for anything else)."""
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return None
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"


def _of_role(obj, role: Role) -> bool:
    where = _defined_in(obj)
    if where is None or not any(_under(where, m) for m in role.modules):
        return False
    if inspect.isfunction(obj):
        return role.functions
    return any(f"{b.__module__}.{b.__qualname__}" in role.bases for b in inspect.getmro(obj))


def _trusted_by_user(ref: Reference, prefixes: Sequence[str]) -> bool:
    """An exact path the user trusts, or a path under a prefix they trust whose object lives under it too (a path
    that walks through a trusted module's imports to other code is not trusted)."""
    if ref.kind == "resolver":
        return ref.name in prefixes
    if ref.name in prefixes:
        return True
    prefix = next((p for p in prefixes if _under(ref.name, p)), None)
    if prefix is None:
        return False
    if ref.kind == "module":
        return True
    where = _defined_in(locate(f"{ref.key}.{TARGET}", ref.name))
    return where is not None and _under(where, prefix)


def _allowed_by_role(ref: Reference) -> bool:
    if ref.kind != "target":
        return False
    role = role_of(ref.key)
    if not role.where:
        return False
    if (role.where, ref.name) in shipped():
        return True
    if not DOTTED.match(ref.name) or not any(_under(ref.name, m) for m in role.modules):
        return False  # decided before any import
    return _of_role(locate(f"{ref.key}.{TARGET}", ref.name), role)


# -- the run's own record --------------------------------------------------------------------------------------------
def _record_payload(names: Iterable[str]) -> bytes:
    return json.dumps(sorted(set(names))).encode()


def seal_run(run_dir: Path) -> Optional[Path]:
    """Records the references of the config just saved in `run_dir` (config.yaml, as written) beyond sf_hydra's
    shipped parts in `run_dir/trust.json`, sealed with the user's key: the user chose them (this run's own config,
    checked before training). None where no key could be made (the folder then counts as from elsewhere for enjoy
    and export: its own custom code then needs trusted_targets)."""
    from sf_hydra.core.files import write_atomically

    saved = OmegaConf.load(Path(run_dir) / "config.yaml")
    names = [str(r) for r in references(saved) if r.kind != "target" or (role_of(r.key).where, r.name) not in shipped()]
    mac = seal(SEAL_PURPOSE, _record_payload(names))
    if mac is None:
        return None
    path = Path(run_dir) / TRUST_FILE
    text = json.dumps({"references": sorted(set(names)), "seal": mac}, indent=1)
    write_atomically(path, lambda tmp: Path(tmp).write_text(text))
    return path


def sealed_references(run_dir: Optional[Path]) -> FrozenSet[str]:
    """The references this user's own training recorded in `run_dir` (empty when the record is absent, unreadable
    or sealed by another key: a folder from elsewhere)."""
    if run_dir is None:
        return frozenset()
    try:
        record = json.loads((Path(run_dir) / TRUST_FILE).read_text())
        names = record["references"]
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return frozenset()
    return frozenset(names) if verify(SEAL_PURPOSE, _record_payload(names), record.get("seal")) else frozenset()


# -- the check -------------------------------------------------------------------------------------------------------
def _refusal(ref: Reference, source: str) -> ConfigError:
    trust = ref.name.split(":", 1)[0] if ref.kind == "resolver" else ref.name
    if ref.kind == "target":
        key, allowed = f"{ref.key}.{TARGET}" if ref.key != TARGET else TARGET, role_of(ref.key).what
    elif ref.kind == "module":
        key, allowed = ref.key, "a registered env id (a saved config may not name a module to import)"
    else:
        key, allowed = ref.key, "a plain value (a saved config may not read the environment or call a resolver)"
    return ConfigError(key, ref.name if ref.kind != "resolver" else "${" + ref.name + "}", (
        f"{allowed} ({source} is data, not your code: it may name sf_hydra's own parts, what your own training of "
        f"the run recorded, and what you trust). If you trust this code: trusted_targets=[{trust}] or "
        f"{TRUSTED_ENV}={trust}"))


def check_saved_config(cfg, source: str, trusted: Optional[Iterable[str]] = None, composed=None,
                       run_dir: Optional[Path] = None) -> None:
    """ConfigError for the first piece of code that saved config `cfg` (read from `source`, a file name for the
    message) names and the user did not choose: see the module's docstring for what is allowed. `composed`: the
    config the user composed now, whose references are theirs; `run_dir`: where the run's sealed record is."""
    prefixes = user_trusted(trusted)
    own = {str(r) for r in references(composed)} if composed is not None else set()
    own |= sealed_references(run_dir)
    for ref in references(cfg):
        if str(ref) in own or _trusted_by_user(ref, prefixes) or _allowed_by_role(ref):
            continue
        raise _refusal(ref, source)
