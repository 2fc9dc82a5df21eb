"""Sample Factory command lines and saved configs -> our overrides, through the one table (flags.py).

    translate_argv(["--env=doom_basic", "--num_workers", "8"], conf_dir)
        -> (["env=doom/basic", "hardware.num_workers=8"], notes)
    import_config(json.load(open("config.json")), conf_dir)
        -> Imported(groups, values, dropped): what differs from our defaults
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml
from omegaconf import OmegaConf

from sf_hydra.app.help import compose_for_help
from sf_hydra.app.sample_factory.flags import (
    GROUPS,
    MAPPED,
    REPLACED,
    RUN_RECORD_KEYS,
    SWITCH,
    Flag,
    flag,
    flag_error,
    ours,
    ours_joint,
    parse,
)
from sf_hydra.config import register_configs
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.faults import EXIT_BAD_CONFIG

# Hydra's own flags (and their short forms): kept as they are, mixed with Sample Factory's.
HYDRA_FLAGS = frozenset({
    "--multirun", "-m", "--cfg", "-c", "--help", "-h", "--config-dir", "-cd", "--config-name", "-cn",
    "--info", "-i", "--resolve", "--package", "-p", "--run", "-r", "--shell-completion", "-sc",
    "--version", "--hydra-help", "--experimental-rerun",
})
DEFAULT_FAMILY = "gym"  # conf/train.yaml's env (gym/cartpole)
_NUMBER = re.compile(r"^-\d")
_PLAIN = re.compile(r"^[\w./:+-]+$")
_NOT_STRINGS = re.compile(r"^(true|false|null|none|nan|inf|[-+]?[\d.]+(e[-+]?\d+)?)$", re.IGNORECASE)


def sf_flags_in(argv: Sequence[str]) -> bool:
    """Whether `argv` has `--name` arguments that are not Hydra's (Sample Factory's, or unknown)."""
    return any(a.startswith("--") and a.split("=", 1)[0] not in HYDRA_FLAGS for a in argv)


def hydra_value(value: Any) -> str:
    """`value` in Hydra's override grammar."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if _PLAIN.match(text) and not _NOT_STRINGS.match(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _is_value(arg: str) -> bool:
    return (not arg.startswith("-") or bool(_NUMBER.match(arg))) and "=" not in arg


def _family(config: str) -> str:
    return config.split("/", 1)[0]


@dataclass
class Translation:
    argv: List[str]  # our command line (Hydra's flags and overrides as given, Sample Factory's translated)
    notes: List[str] = field(default_factory=list)  # flags dropped: they ask for nothing here


def read_argv(argv: Sequence[str], conf_dir: str,
              errors: Optional[List[ConfigError]] = None) -> List[Tuple[int, int, Flag, Any]]:
    """[(start, end, row, parsed value)] of the Sample Factory flags in `argv` (argv[start:end]:
    the flag and its value). An unknown flag or a bad value: a ConfigError appended to `errors` (the
    flag and the values after it skipped), or raised at once when `errors` is None."""
    argv, found, i = list(argv), [], 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--") or arg.split("=", 1)[0] in HYDRA_FLAGS:
            i += 1
            continue
        name, eq, inline = arg[2:].partition("=")
        try:
            row = flag(name, conf_dir, inline if eq else None)
        except ConfigError as e:
            if errors is None:
                raise
            errors.append(e)
            i += 1
            while not eq and i < len(argv) and _is_value(argv[i]):  # its values, whatever it takes
                i += 1
            continue
        listed = row.type.rstrip("?") in ("ints", "strs")
        if eq or row.type == SWITCH:
            raw, end = inline if eq else "True", i + 1
        else:
            end = i + 1
            while end < len(argv) and _is_value(argv[end]) and (listed or end == i + 1):
                end += 1
            raw = argv[i + 1:end] if listed else (argv[i + 1] if end > i + 1 else None)
        try:
            if raw is None:
                raise flag_error(name, None, f"needs a value: --{name}=VALUE or --{name} VALUE")
            if not listed and isinstance(raw, str) and "," in raw:  # a --multirun sweep: a,b,c
                found.append((i, end, row, Sweep(parse(row, part) for part in raw.split(","))))
            else:
                found.append((i, end, row, parse(row, raw)))
        except ConfigError as e:
            if errors is None:
                raise
            errors.append(e)
        i = end
    return found


def all_refused(errors: Sequence[ConfigError], argv: Sequence[str] = ()) -> ConfigError:
    """One ConfigError for the flags of a command line that cannot be translated: the one as it is, several
    one per line, each with its reason, in the order of `argv`."""
    def place(e: ConfigError) -> int:
        return next((i for i, a in enumerate(argv) if a.split("=", 1)[0] == e.key), len(argv))

    errors = sorted(errors, key=place)
    if len(errors) == 1:
        return errors[0]
    error = ConfigError(errors[0].key, errors[0].value, "several flags")
    error.args = (f"{len(errors)} Sample Factory flags cannot be translated (docs/parameters.md):\n  "
                  + "\n  ".join(str(e) for e in errors),)
    return error


class Sweep(list):
    """The values of a swept flag (`--seed=1,2,3` with --multirun)."""


def _pairs(row: Flag, value, family: str, stage: str = "train") -> Dict[str, str]:
    """{our key: override value} for a flag's value (a sweep: each key's values joined by commas)."""
    values = value if isinstance(value, Sweep) else [value]
    dicts = [ours(row, v, family, stage) for v in values]
    if any(d.keys() != dicts[0].keys() for d in dicts):
        raise flag_error(row.name, ",".join(map(str, values)), "a sweep over values that set the same keys")
    return {k: ",".join(d[k] if k in GROUPS else hydra_value(d[k]) for d in dicts) for k in dicts[0]}


def translate_argv(argv: Sequence[str], conf_dir: str, stage: str = "train") -> Translation:
    """Sample Factory's `--flag=value` / `--flag value` arguments of `argv` replaced, in place, by
    our overrides; everything else kept. `stage`: train (train.py's keys) or enjoy (enjoy.py's: its
    evaluation flags, and of the training flags those that find the run). Raises one ConfigError naming
    every flag it cannot map, each with its reason (all_refused)."""
    argv, errors = list(argv), []
    found = read_argv(argv, conf_dir, errors)
    if stage == "enjoy":
        converted = [(s, e, row, v, _attempt(errors, _pairs, row, v, "", stage)) for s, e, row, v in found]
        if errors:
            raise all_refused(errors, argv)
        return _translated(argv, converted, stage)
    family = DEFAULT_FAMILY
    for arg in argv:  # an `env=<family>/<name>` of ours on the same line
        if arg.startswith("env="):
            family = _family(arg[len("env="):])
    for _, _, row, value in found:
        if row.name == "env" and value is not None:
            try:  # a name that does not map is refused once, with the flag's other keys below
                family = _family(ours(row, value[0] if isinstance(value, Sweep) else value)["env"])
            except ConfigError:
                pass
    joints = _attempt(errors, _joint_values, found) or {}
    converted = []
    for start, end, row, value in found:
        if row.joint:  # the joint's keys at its first flag
            given = joints.pop(row.joint, None)  # None: set with the joint's first flag, above
            pairs = None if given is None else _attempt(errors, lambda: {
                k: hydra_value(v) for k, v in ours_joint(row.joint, given, family).items()})
        else:
            pairs = _attempt(errors, _pairs, row, value, family)
        converted.append((start, end, row, value, pairs))
    if errors:
        raise all_refused(errors, argv)
    return _translated(argv, converted)


def _attempt(errors: List[ConfigError], fn, *args):
    """fn(*args), or None with its ConfigError appended to `errors`."""
    try:
        return fn(*args)
    except ConfigError as e:
        errors.append(e)
        return None


def _translated(argv: List[str], converted, stage: str = "train") -> Translation:
    """`argv` with each flag's arguments (argv[start:end]) replaced by its overrides."""
    out, notes, pos = [], [], 0
    for start, end, row, value, pairs in converted:
        out += argv[pos:start]
        if pairs is None:
            pairs = {}
        elif not pairs:
            note = f"--{row.name}={value}: dropped ({_why(row, stage)})"
            if note not in notes:  # a flag given twice (as some of Sample Factory's own lines do): said once
                notes.append(note)
        out += [f"{k}={v}" for k, v in pairs.items()]
        pos = end
    return Translation(out + argv[pos:], notes)


def _joint_values(found: Sequence[Tuple[int, int, Flag, Any]]) -> Dict[str, Dict[str, Any]]:
    """{joint: {flag: value}} of the flags that set keys together (a sweep of one is refused)."""
    joints: Dict[str, Dict[str, Any]] = {}
    for _, _, row, value in found:
        if not row.joint:
            continue
        if isinstance(value, Sweep):
            raise flag_error(row.name, ",".join(map(str, value)), f"one value (it sets {row.note}); "
                             f"sweep {row.key} instead")
        joints.setdefault(row.joint, {})[row.name] = value
    return joints


def _why(row: Flag, stage: str = "train") -> str:
    if stage == "enjoy" and row.stage == "train":
        return "a training flag: enjoy.py plays the run with the config it saved"
    if row.kind == MAPPED:
        return row.note
    return f"replaced by {row.key}: {row.note}" if row.kind == REPLACED else f"n/a: {row.note}"


# --- a saved config.json -----------------------------------------------------------------------

@dataclass
class Imported:
    groups: Dict[str, str]  # {group: option}: env (and algo where the env's default differs)
    values: Dict[str, Any]  # {dotted key: value} that differ from our defaults
    dropped: List[str] = field(default_factory=list)  # flags that ask for nothing here, or are not imported

    def overrides(self) -> List[str]:
        return ([f"{g}={o}" for g, o in self.groups.items()]
                + [f"{k}={hydra_value(v)}" for k, v in self.values.items()])


_ABSENT = object()


def _same(ours_value, value) -> bool:
    if ours_value is None or value is None:
        return ours_value is None and value is None
    if isinstance(ours_value, bool) or isinstance(value, bool):
        return ours_value is value or ours_value == value and type(ours_value) is type(value)
    if isinstance(ours_value, (int, float)) and isinstance(value, (int, float)):
        return float(ours_value) == float(value)
    return str(ours_value) == str(value) if not isinstance(value, list) else list(ours_value) == value


def compose(conf_dir: str, overrides: Sequence[str]):
    register_configs()
    return compose_for_help(conf_dir, list(overrides))


def check_imported_values(sf_cfg: Dict[str, Any]) -> None:
    """A config.json from elsewhere is data: a value holding `${` would become an OmegaConf interpolation here,
    which reads this machine's environment (`${oc.env:...}`) into the imported run's config, and an env of the form
    `module:Id` would have gymnasium import that module. Sample Factory writes neither; each is refused, naming the
    flag."""
    env = sf_cfg.get("env")
    if isinstance(env, str) and ":" in env:
        raise ConfigError("env", env, "a Sample Factory env name or a registered gymnasium id (an imported config "
                          "may not name a module to import)")
    for name, raw in sf_cfg.items():
        values = raw if isinstance(raw, (list, tuple)) else [raw]
        if any(isinstance(v, str) and "${" in v for v in values):
            raise ConfigError(f"config.json: {name}", raw, "a value without '${' (an interpolation would read this "
                              "machine's environment or config into the imported run; Sample Factory writes none)")


def import_config(sf_cfg: Dict[str, Any], conf_dir: str) -> Imported:
    """What of a Sample Factory run's config.json differs from our defaults for its env. Every
    flag that cannot be honoured is named in one ConfigError."""
    errors: List[str] = []

    def attempt(fn, *args):
        try:
            return fn(*args)
        except ConfigError as e:
            errors.append(str(e))
            return _ABSENT

    env_row = flag("env", conf_dir)
    if sf_cfg.get("env") is None:
        raise ConfigError("env", None, "a config.json with an env (Sample Factory's --env)")
    check_imported_values(sf_cfg)
    groups = ours(env_row, parse(env_row, sf_cfg["env"]))
    base_overrides = [f"{k}={v if k in GROUPS else hydra_value(v)}" for k, v in groups.items()]
    base = compose(conf_dir, base_overrides)
    family = str(base.env.family)
    chosen = OmegaConf.to_container(base.hydra.runtime.choices)
    dropped, wanted, joints = [], {}, {}
    for name, raw in sf_cfg.items():
        if name in RUN_RECORD_KEYS or name == "env":
            continue
        if name == "train_dir":
            dropped.append(f"--train_dir={raw}: not imported (a folder on the machine that ran it)")
            continue
        row = attempt(flag, name, None, raw)
        value = _ABSENT if row is _ABSENT else attempt(parse, row, raw)
        if value is not _ABSENT and row.joint:
            joints.setdefault(row.joint, {})[name] = (row, value)
            continue
        pairs = _ABSENT if value is _ABSENT else attempt(ours, row, value, family)
        if pairs is _ABSENT:
            continue
        if not pairs:
            dropped.append(f"--{name}={value}: dropped ({_why(row)})")
        for key, ours_value in pairs.items():
            wanted[key] = (row, value, ours_value)
    for joint, given in joints.items():
        pairs = attempt(ours_joint, joint, {n: v for n, (_, v) in given.items()}, family)
        row, value = next(iter(given.values()))
        for key, ours_value in ({} if pairs is _ABSENT else pairs).items():
            wanted[key] = (row, value, ours_value)
    algo = wanted.pop("algo", None)
    if algo and chosen.get("algo") != algo[2]:
        groups["algo"] = algo[2]
        base = compose(conf_dir, base_overrides + [f"algo={algo[2]}"])
    values = {k: v for k, v in groups.items() if k not in GROUPS}
    groups = {k: v for k, v in groups.items() if k in GROUPS}
    for key, (row, value, ours_value) in wanted.items():
        current = OmegaConf.select(base, key, default=_ABSENT, throw_on_missing=False)
        if current is _ABSENT:
            if not _same(row.sf_default, value):
                errors.append(str(flag_error(row.name, value, f"{key} is not a key of this version's config")))
            continue
        if OmegaConf.is_config(current):
            current = OmegaConf.to_container(current)
        current = current.value if isinstance(current, Enum) else current
        if not _same(current, ours_value):
            values[key] = ours_value
    if OmegaConf.select(base, EARLY_STOP) is not None:  # SF has no early stop: its run trained to its budget
        values[EARLY_STOP] = None
    if errors:
        error = ConfigError("config.json", None, "flags that cannot be imported")
        error.args = ("config.json: flags that cannot be imported here:\n  " + "\n  ".join(errors),)
        raise error
    return Imported(groups, values, dropped)


def preset_yaml(imported: Imported, source: str = "") -> str:
    """An experiment preset (`+experiment=<name>`): the env group and the values that differ."""
    tree: Dict[str, Any] = {}
    for key, value in imported.values.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    head = ["# @package _global_",
            f"# Imported from Sample Factory's {source or 'config.json'} by python -m sf_hydra.app.import_sf_config:",
            "# the values that differ from ours for this env. Run: python train.py +experiment=<this file's name>"]
    body = {"defaults": [{f"override /{g}": o} for g, o in imported.groups.items()] + ["_self_"], **tree}
    return "\n".join(head) + "\n" + yaml.safe_dump(body, sort_keys=False, default_flow_style=False, width=100)


# --- what a Sample Factory command line leaves unsaid --------------------------------------------

EARLY_STOP = "train_until_avg_return"  # ours only: an env config may stop at a return (gym/cartpole: 480)
BUDGETS = ("train_for_env_steps", "train_for_seconds")  # Sample Factory's flags, with its defaults (1e10)


def _sets(argv: Sequence[str], key: str) -> bool:
    return any(not a.startswith("-") and a.split("=", 1)[0].lstrip("+~") == key for a in argv)


def sf_defaults(argv: Sequence[str], conf_dir: str) -> Translation:
    """A translated training command line as Sample Factory would run it where it says nothing of when to
    stop: the early stop off (`train_until_avg_return=null` added unless the line sets it: SF has none),
    and a note naming each budget of ours (an env config's `train_for_env_steps`) that is not SF's
    default, which the line may set with its flag. The budgets are read from the composed config: none
    is named for a --multirun sweep or a config folder of the user's (--config-dir)."""
    argv, notes = list(argv), []
    if not _sets(argv, EARLY_STOP):
        last = max((i for i, a in enumerate(argv) if "=" in a and not a.startswith("-")), default=len(argv) - 1)
        argv.insert(last + 1, f"{EARLY_STOP}=null")  # beside the other overrides (Hydra takes them together)
        notes.append(f"{EARLY_STOP}=null: Sample Factory has no early stop at an average return, our env "
                     f"configs may (gym/cartpole: 480); {EARLY_STOP}=<return> keeps one")
    unsaid = [key for key in BUDGETS if not _sets(argv, key)]
    if unsaid and not any(a in ("--multirun", "-m", "--config-dir", "-cd") or a.startswith("--config-dir=")
                          for a in argv):
        try:
            cfg = compose(conf_dir, [a for a in argv if "=" in a and not a.startswith("-")])
        except Exception:  # a bad override: refused with its key by train.py's checks, after this
            return Translation(argv, notes)
        for key in unsaid:
            default = flag(key).sf_default
            if float(cfg[key]) != float(default):
                notes.append(f"{key}={_number(cfg[key])}: env {cfg.env.name}'s budget (Sample Factory's "
                             f"default: {_number(default)}; --{key} sets it)")
    return Translation(argv, notes)


def _number(value) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def sf_command_line(argv: Sequence[str], conf_dir: str, prog: str, stage: str = "train") -> List[str]:
    """`argv` with its Sample Factory flags translated (unchanged when it has none); prints the
    equivalent command on stderr. A flag that cannot be mapped exits 2, naming it, before any
    process starts. `stage`: train (train.py) or enjoy (enjoy.py)."""
    if not sf_flags_in(argv):
        return list(argv)
    try:
        translation = translate_argv(argv, conf_dir, stage)
    except ConfigError as e:
        print(f"bad config: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_CONFIG)
    if stage == "train" and not any(a in ("--help", "-h") for a in translation.argv):
        unsaid = sf_defaults(translation.argv, conf_dir)
        translation = Translation(unsaid.argv, translation.notes + unsaid.notes)
    for note in translation.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"Sample Factory flags translated (docs/parameters.md); the same command: "
          f"{prog} {shlex.join(translation.argv)}", file=sys.stderr)
    return translation.argv
