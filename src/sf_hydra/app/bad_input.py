"""The schema stage (sf_hydra.app.checks): train.py's command line composed and checked before Hydra starts
the run, with one message shape for every bad input, `key=value is not allowed: ...` (ConfigError), and
nothing written into the run folder.

`compose_command_line` composes the config the way `hydra.main` will (same primary config folder,
`--config-dir`, `--config-name`), through Hydra's public compose API, and turns what Hydra and OmegaConf
raise while composing (an unparsable override, an unknown key, a value of the wrong type or outside an
Enum, an unknown group option) into a ConfigError that names the key, with the near matches (difflib)
and the keys or options there are. It also refuses what Hydra accepts silently: `+group.key=...` adding
a key to a typed node (`+algo.learnign_rate=1`), and checks the env names, the launcher's packages and
that `train_dir` can be created. In --multirun only the keys are checked (with the first value of each
sweep): each run's values are checked in its own job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib.util
import inspect
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

from hydra import compose, initialize_config_dir, initialize_config_module
from hydra._internal.utils import get_args_parser  # hydra.main's own argument parser: no public equivalent
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, MissingConfigException
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

from sf_hydra.app.env_choices import check_env_overrides
from sf_hydra.app.resume_config import resumed_config, resumes
from sf_hydra.config import register_configs
from sf_hydra.config.aliases import BUDGET_FORMS, BUDGET_KEYS
from sf_hydra.config.sweep_folders import is_multirun
from sf_hydra.core.errors import ConfigError

SKIP_FLAGS = ("help", "hydra_help", "cfg", "info", "shell_completion", "experimental_rerun")
SLURM_EXTRA = 'pip install -e ".[slurm]"'
SUBMITIT_LAUNCHERS = ("local_parallel", "slurm", "submitit_local", "submitit_slurm")
SHOWN_KEYS = 40  # a group's keys listed in a message, at most
SEARCHPATH = "hydra.searchpath"


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _initialize(primary: str):
    """Hydra's global state for `primary`, the config folder hydra.main reads (cli.py's config_path, or
    --config-path): a package (pkg://), or a folder (relative: to cli.py's folder, as hydra.main takes it)."""
    if primary.startswith("pkg://"):
        return initialize_config_module(primary[len("pkg://"):].replace("/", "."), job_name="train",
                                        version_base="1.3")
    folder = primary[len("file://"):] if primary.startswith("file://") else primary
    if not os.path.isabs(folder):
        folder = os.path.join(os.path.dirname(os.path.realpath(__file__)), folder)
    return initialize_config_dir(os.path.normpath(folder), job_name="train", version_base="1.3")


class Composer:
    """Composes the config as hydra.main would for `args` (Hydra's parsed command line). `--config-dir`
    becomes a `hydra.searchpath` entry: hydra.main puts that folder where Hydra puts hydra.searchpath's
    (after the primary folder and the plugins', before the schema), ahead of any hydra.searchpath given."""

    def __init__(self, args, config_dir: str):
        self.config_name = args.config_name or "train"
        self.extra: List[str] = []
        if args.config_dir is not None:
            extra = os.path.abspath(args.config_dir)
            if not os.path.isdir(extra):
                raise ConfigError("--config-dir", args.config_dir, "an existing folder")
            self.extra = [f"file://{extra}"]
        GlobalHydra.instance().clear()
        self.context = _initialize(args.config_path or config_dir)

    def _with_search_path(self, overrides: Sequence[str]) -> List[str]:
        if not self.extra:
            return list(overrides)
        given: List[str] = []
        rest = []
        for arg in overrides:
            if _key_value(arg)[0] == SEARCHPATH:
                value = OverridesParser.create().parse_override(arg).value()
                given = [str(v) for v in value] if isinstance(value, list) else []
            else:
                rest.append(arg)
        return rest + [f"{SEARCHPATH}=[{','.join(_quoted(p) for p in self.extra + given)}]"]

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        return compose(self.config_name, self._with_search_path(overrides), return_hydra_config=True)

    def group_options(self, group: str) -> List[str]:
        loader = GlobalHydra.instance().config_loader()
        return sorted(loader.get_group_options(group, config_name=self.config_name,
                                               overrides=self._with_search_path([])))

    def group_exists(self, name: str) -> bool:
        loader = GlobalHydra.instance().config_loader()
        return bool(loader.get_group_options(name, results_filter=None, config_name=self.config_name,
                                             overrides=self._with_search_path([])))

    def close(self) -> None:
        self.context.__exit__(None, None, None)  # Hydra's global state as it was before
        GlobalHydra.instance().clear()


@contextlib.contextmanager
def hydra_for(argv: Sequence[str], config_dir: str) -> Iterator[Composer]:
    """Hydra's global state (its config loader, the compose API) as hydra.main sets it for `argv`, while a job
    composed by compose_job runs."""
    composer = Composer(get_args_parser().parse_args(list(argv)), config_dir)
    try:
        yield composer
    finally:
        composer.close()


def _key_value(arg: str):
    key, _, value = arg.partition("=")
    return key, value


def _shown_key(key: str) -> str:
    return "+experiment" if key == "+experiments" else key  # the alias the user typed (config/aliases.py)


def _parse(overrides: Sequence[str]):
    parser, parsed = OverridesParser.create(), []
    for arg in overrides:
        try:
            parsed.append(parser.parse_override(arg))
        except HydraException as e:  # OverrideParseException, or the grammar's own error
            key, value = _key_value(arg)
            first = str(e).strip().splitlines()[0]
            raise ConfigError(key, value, f"an override in Hydra's syntax key=value ({first})") from None
    return parsed


def _first_of_sweeps(parsed) -> List[str]:
    """Each sweep override (a,b / range(...)) with its first value; interval() and glob() sweeps left out."""
    out = []
    for ov in parsed:
        if not ov.is_sweep_override():
            out.append(ov.input_line)
            continue
        try:
            out.append(f"{ov.get_key_element()}={next(iter(ov.sweep_string_iterator()))}")
        except Exception:  # an interval or glob: its values come from the sweeper
            continue
    return out


def _leaf_keys(node, prefix: str = "") -> List[str]:
    keys = []
    for key in node.keys() if isinstance(node, DictConfig) else []:
        child = node._get_node(key)
        full = f"{prefix}{key}"
        keys.append(full)
        if isinstance(child, DictConfig):
            keys += _leaf_keys(child, full + ".")
    return keys


def _near_keys(key: str, known: List[str]) -> List[str]:
    near = difflib.get_close_matches(key, known, n=5, cutoff=0.75)
    leaf = key.rsplit(".", 1)[-1]
    near += [k for k in known if k.rsplit(".", 1)[-1] == leaf and k not in near]  # the key in another group
    return near[:8]


def unknown_key(key: str, value, cfg: Optional[DictConfig]) -> ConfigError:
    """`key` names nothing in `cfg` (the config composed without it): near matches, then the group's keys."""
    if cfg is None:
        return ConfigError(key, value, "a key of the config (run with --cfg job to see them)")
    bare = key.lstrip("+~")
    known = [k for k in _leaf_keys(cfg) if bare.startswith("hydra.") or not k.startswith("hydra")]
    parent = bare.rsplit(".", 1)[0] if "." in bare else ""
    node = OmegaConf.select(cfg, parent) if parent else cfg
    near = _near_keys(bare, known)
    where = f"'{parent}'" if parent else "the config's top level"
    parts = [f"no key '{bare.rsplit('.', 1)[-1]}' in {where}", f"near matches: {near}" if near else "no near match"]
    if isinstance(node, DictConfig):
        group_keys = sorted(k for k in node.keys() if parent or k != "hydra")
        more = f" (+{len(group_keys) - SHOWN_KEYS} more)" if len(group_keys) > SHOWN_KEYS else ""
        parts.append(f"keys of {where}: {group_keys[:SHOWN_KEYS]}{more}")
        if not key.startswith("+") and not dataclasses.is_dataclass(OmegaConf.get_type(node)):
            parts.append(f"to add a key here: +{bare}={value}")
    return ConfigError(_shown_key(key), value, "; ".join(parts))


def _value_of(key: str, overrides: Sequence[str]):
    for arg in overrides:
        k, v = _key_value(arg)
        if k.lstrip("+~") == key:
            return v
    return None


def _without(overrides: Sequence[str], key: str) -> List[str]:
    return [arg for arg in overrides if _key_value(arg)[0].lstrip("+~") != key]


def _safe_compose(composer: Composer, overrides: Sequence[str]) -> Optional[DictConfig]:
    try:
        return composer.compose(overrides)
    except Exception:
        return None


def framed(exc: Exception, composer: Composer, overrides: Sequence[str]) -> ConfigError:
    """What Hydra raised while composing `overrides`, as a ConfigError naming the key."""
    cause = exc.__cause__
    text = str(exc).strip()
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        missing = exc.missing_cfg_file
        for arg in overrides:
            key, value = _key_value(arg)
            if f"{key.lstrip('+~')}/{value}" == missing:
                group = key.lstrip("+~")
                options = [o for o in composer.group_options(group) if not o.endswith("_schema")]
                near = difflib.get_close_matches(value, options, n=10, cutoff=0.6)
                return ConfigError(_shown_key(key), value, f"an option of the group '{group}': "
                                   f"{f'near matches: {near}' if near else 'no near match'}; options: {options}")
        return ConfigError("defaults", missing, "a config that exists: " + text.splitlines()[0])
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and cause.full_key:
        key = cause.full_key
        return unknown_key(key, _value_of(key, overrides), _safe_compose(composer, _without(overrides, key)))
    if isinstance(cause, ValidationError) and cause.full_key:
        key, msg = cause.full_key, (cause.msg or str(cause)).strip().splitlines()[0]
        choices = re.search(r"expected one of \[(.*)\]", msg)
        allowed = f"one of {choices.group(1)}" if choices else msg
        allowed = f"{BUDGET_FORMS} ({msg})" if key in BUDGET_KEYS else allowed + _integer_hint(msg)
        element = re.fullmatch(r"(.+?)((?:\[\d+\])+)", key)  # a list's element: name the list as it was given
        if element and _value_of(key, overrides) is None:
            key = element.group(1)
            allowed = f"element {element.group(2)}: {allowed}"
        return ConfigError(key, _value_of(key, overrides), allowed)
    at = re.search(r"An item is already at '([^']+)'", text)
    if at:
        key = at.group(1)
        return ConfigError(f"+{key}", _value_of(key, overrides),
                           f"an override of an existing key without '+': {key}=... (or ++{key}=... to add or override)")
    key = next((k for k, _ in map(_key_value, overrides) if k.lstrip("+~") in text), "overrides")
    return ConfigError(key, _value_of(key.lstrip("+~"), overrides), text.splitlines()[0])


def _integer_hint(msg: str) -> str:
    """'; write 100000' where OmegaConf refused a whole-number float (`1e5`, `2.0`) for an integer key:
    the value the user meant, written as OmegaConf takes it; '' for any other refusal."""
    whole = re.search(r"Value '([^']+)' of type 'float' could not be converted to Integer", msg)
    if not whole:
        return ""
    value = float(whole.group(1))
    return f"; write {int(value)}" if value.is_integer() else ""


def _check_additions(cfg: DictConfig, parsed, composer: Composer, overrides: Sequence[str]) -> None:
    """`+a.b=v` / `++a.b=v` that Hydra adds silently and nothing would read: onto a typed node (a schema
    dataclass) without a field `b`, or onto a part built from `_target_` whose callable takes no argument `b`.
    Plain dict nodes (env.kwargs) and config groups (+experiment=...) take any addition."""
    for ov in parsed:
        if not (ov.is_add() or ov.is_force_add()) or ov.key_or_group.startswith("hydra"):
            continue
        key = ov.key_or_group
        if composer.group_exists(key.replace(".", "/")) or "/" in key:
            continue
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        if not isinstance(node, DictConfig):
            continue
        schema = OmegaConf.get_type(node)
        typed = dataclasses.is_dataclass(schema)
        if _reserved(leaf) and not typed:
            continue  # `+callbacks.mine._target_=...`: a node's own keys (Hydra's _target_, our _enabled_)
        if typed and leaf in {f.name for f in dataclasses.fields(schema)}:
            continue
        arguments = _arguments(node._target_) if "_target_" in node else None
        if arguments is not None and leaf not in arguments:
            if typed:  # the schema's keys say more than the constructor's
                raise unknown_key(ov.get_key_element(), ov.get_value_element_as_str(),
                                  _safe_compose(composer, _without(overrides, key)))
            near = difflib.get_close_matches(leaf, arguments, n=5, cutoff=0.6)
            raise ConfigError(ov.get_key_element(), ov.get_value_element_as_str(),
                              f"an argument of {node._target_} ({f'near matches: {near}; ' if near else ''}"
                              f"its arguments: {arguments})")
        if typed and "_target_" not in node:
            raise unknown_key(ov.get_key_element(), ov.get_value_element_as_str(),
                              _safe_compose(composer, _without(overrides, key)))


def _reserved(key: str) -> bool:
    """Hydra's keys of a node (`_target_`, `_partial_`, ...) and sf_hydra.app.trainer_parts' `_enabled_`."""
    return len(key) > 2 and key.startswith("_") and key.endswith("_")


def _arguments(target: str) -> Optional[List[str]]:
    """The keyword arguments the callable at dotted path `target` takes; None when it takes any (**kwargs) or
    they cannot be known (check_config names a target that does not import)."""
    try:
        params = list(inspect.signature(get_object(target)).parameters.values())
    except Exception:
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _check_launcher(overrides: Sequence[str]) -> None:
    for arg in overrides:
        key, value = _key_value(arg)
        if key.lstrip("+~") == "hydra/launcher" and value in SUBMITIT_LAUNCHERS:
            missing = [m for m in ("submitit", "hydra_plugins.hydra_submitit_launcher") if not _importable(m)]
            if missing:
                raise ConfigError(key, value, f"a launcher whose packages are installed: it needs the slurm extra "
                                  f"(missing: {', '.join(missing)}): {SLURM_EXTRA}")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def check_creatable(key: str, folder) -> None:
    """`folder` exists as a writable folder, or can be created: its nearest existing parent is a folder that
    takes a new folder. Refused with the key, the path and why (a file in the way, no permission, a file
    system that takes no folders), before anything is written."""
    path = Path(folder).absolute()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(key, str(folder), f"a folder that can be created: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(key, str(folder), f"a folder that can be created: permission denied on {probe}")
    why = _refuses_folders(probe)
    if why is not None:
        raise ConfigError(key, str(folder), f"a folder that can be created: {probe} takes no new folder ({why})")


def _refuses_folders(folder: Path) -> Optional[str]:
    """Why no folder can be made in the existing `folder`, or None when one can. Permissions do not tell
    (root passes every permission check, and /proc, /sys or a read-only mount refuse a folder anyway), so a
    folder is made there and removed at once: nothing stays behind."""
    try:
        made = tempfile.mkdtemp(prefix=".sf_hydra_probe_", dir=folder)
    except OSError as e:
        mount = _mount_of(folder)
        where = ""
        if mount is not None:
            where = f"; it is on a {mount[1]} file system mounted {'read-only ' if mount[2] else ''}at {mount[0]}"
        return f"making a folder there failed: {e.strerror or type(e).__name__}{where}"
    os.rmdir(made)
    return None


def _mount_of(path: Path) -> Optional[Tuple[str, str, bool]]:
    """(mount point, file system type, read-only) of the mount that holds `path`, read from /proc/self/mounts;
    None where that file is missing (not Linux) or names no mount of it."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        fields = line.split()
        if len(fields) < 4:
            continue
        point = fields[1].replace("\\040", " ")  # the file's escape for a space
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[2], "ro" in fields[3].split(","))
    return best


def compose_command_line(argv: Sequence[str], config_dir: str) -> Optional[DictConfig]:
    """The schema stage: raises ConfigError for bad input in `argv` (Hydra's command line). For a single run
    returns the composed config, without Hydra's node (as the task function gets it); None when Hydra only
    shows something (--help, --cfg) or in --multirun (its keys checked with each sweep's first value)."""
    job = compose_job(argv, config_dir)
    if job is None:
        return None
    with open_dict(job):
        job.pop("hydra", None)  # the task function's config has no hydra node either
    return job


def compose_job(argv: Sequence[str], config_dir: str) -> Optional[DictConfig]:
    """compose_command_line's config with Hydra's node (`hydra.*`): the job Hydra runs for a single run
    (sf_hydra.app.cli runs it on this compose: the command line is composed once)."""
    register_configs()  # the schema nodes
    check_env_overrides(argv, Path(config_dir))
    multirun = is_multirun(argv) or any(a.replace(" ", "") in ("hydra.mode=MULTIRUN", "hydra.mode=multirun")
                                        for a in argv)
    args = get_args_parser().parse_args(list(argv))
    if any(getattr(args, flag, None) for flag in SKIP_FLAGS):
        return None
    overrides = list(args.overrides)
    _check_launcher(overrides)
    parsed = _parse(overrides)
    if multirun:
        overrides = _first_of_sweeps(parsed)
        parsed = _parse(overrides)
    composer = Composer(args, config_dir)
    try:
        try:
            cfg = composer.compose(overrides)
        except (HydraException, OmegaConfBaseException) as e:
            raise framed(e, composer, overrides) from None
        _check_additions(cfg, parsed, composer, overrides)
    finally:
        composer.close()
    check_creatable("train_dir", cfg.train_dir)
    return None if multirun else cfg


def resume_command_line(argv: Sequence[str], config_dir: str, cfg: DictConfig) -> DictConfig:
    """The resume stage: `cfg` (compose_command_line's, for a single run) when the command starts a run; when
    it resumes one, that run's saved config with the overrides of `argv` applied (sf_hydra.app.resume_config),
    or a ConfigError naming every override a resume may not take. Reads the run folder; writes nothing."""
    if not resumes(cfg):
        return cfg
    args = get_args_parser().parse_args(list(argv))
    composer = None
    try:
        composer = Composer(args, config_dir)
        return resumed_config(cfg, list(args.overrides), composer)
    finally:
        if composer is not None:
            composer.close()
