"""`python train.py --help [prefix]`: every config group with its options and every key with
its value and one-line meaning, generated from the composed config and the schema's own
comments (sf_hydra.config.field_docs), so it cannot drift from what `train.py` runs.

    python train.py --help                    # everything
    python train.py --help algo               # the algo group and its keys
    python train.py --help algo.lr            # keys starting with algo.lr
    python train.py env=doom/basic --help env # values as that command composes them

Values are those of the command line's own overrides (with none: the defaults), shown
unresolved (`${...}` interpolations as written).
"""

from __future__ import annotations

import sys
import textwrap
import typing
from dataclasses import is_dataclass
from enum import Enum
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from sf_hydra.app.env_choices import SERVED_FAMILY, env_configs
from sf_hydra.config.field_docs import class_doc, field_docs

HELP_FLAGS = ("--help", "-h")
WIDTH = 120
# Groups that are plumbing, not choices a user makes: never listed.
HIDDEN_GROUPS = ("env_family", "schema/env", "experiments", "experiment")
SHOWN_HYDRA_GROUPS = ("hydra/launcher", "hydra/sweeper")

USAGE = """\
sf_hydra: asynchronous PPO (APPO) on one machine, configured with Hydra.

  python train.py [group=option ...] [key=value ...]   train (or resume) a run
  python train.py --help [prefix]                      this help; a prefix narrows it (--help algo, --help algo.lr)
  python train.py --multirun key=a,b ...               a sweep, one run per combination
  python train.py --cfg job                            print the composed config and exit
  python train.py --hydra-help                         Hydra's own flags
  python train.py --env=doom_basic --num_workers=8     Sample Factory's flags: translated (docs/parameters.md)
"""


ENJOY_USAGE = """\
sf_hydra enjoy: plays a trained run's policy (its config and checkpoint come from the run folder).

  python enjoy.py experiment=<name> [key=value ...]     play ${train_dir}/<name>: returns to <run>/enjoy/eval.json
  python enjoy.py run_dir=<path> video=true             a run anywhere (e.g. inside a sweep), with a video
  python enjoy.py --help [prefix]                       this help
"""


def prog(script: str) -> str:
    """How the user started us: `sf-train` / `sf-enjoy` (console scripts) or `python train.py`."""
    name = Path(sys.argv[0]).name
    return name if name.startswith("sf-") else f"python {script}"


def help_request(argv: Sequence[str]) -> Optional[Tuple[str, List[str]]]:
    """(prefix, overrides) when `argv` asks for help (`--help [prefix]`, `--help=prefix`, `-h`), else None."""
    argv = list(argv)
    for i, arg in enumerate(argv):
        flag, _, inline = arg.partition("=")
        if flag not in HELP_FLAGS:
            continue
        rest = argv[:i] + argv[i + 1:]
        prefix = inline
        if not prefix and i + 1 < len(argv) and "=" not in argv[i + 1] and not argv[i + 1].startswith("-"):
            prefix = argv[i + 1]
            rest = argv[:i] + argv[i + 2:]
        return prefix, [a for a in rest if "=" in a and not a.startswith("-")]
    return None


def compose_for_help(config_dir: str, overrides: Sequence[str], config_name: str = "train") -> DictConfig:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
            return compose(config_name, overrides=list(overrides), return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()


def group_options(config_dir: str, cfg: DictConfig) -> List[Tuple[str, str, List[str]]]:
    """[(group, chosen option, options)] for the groups a user picks from."""
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    groups = sorted(g for g in choices if not g.startswith(HIDDEN_GROUPS)
                    and (not g.startswith("hydra/") or g in SHOWN_HYDRA_GROUPS))
    rows = []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            for group in groups:
                if group == "env":
                    options = env_configs(Path(config_dir)) + [f"{SERVED_FAMILY}/<game> (any ALE game)"]
                else:  # a plugin's structured schema is not a choice
                    options = sorted(o for o in loader.get_group_options(group) if not o.endswith("_schema"))
                rows.append((group, str(choices[group]), options))
    finally:
        GlobalHydra.instance().clear()
    return rows


def _enum_choices(cls: type) -> dict:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # a hint that does not resolve: no choices listed, the doc still is
        return {}
    return {name: [m.name for m in hint] for name, hint in hints.items()
            if isinstance(hint, type) and issubclass(hint, Enum)}


def _fmt(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, (dict, list)):
        return yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False).strip()
    return str(value) if value != "" else "''"


def key_rows(node: DictConfig, path: str = "") -> List[Tuple[str, str, str, bool]]:
    """[(dotted key, value, doc, is_section)] for a typed node, depth first in schema order;
    a nested dataclass node is a section row followed by its own keys."""
    cls = OmegaConf.get_type(node)
    docs = field_docs(cls) if is_dataclass(cls) else {}
    choices = _enum_choices(cls) if is_dataclass(cls) else {}
    rows = []
    for key in node.keys():
        if not path and key == "hydra":  # Hydra's own node (--cfg hydra shows it)
            continue
        dotted = f"{path}{key}"
        doc = docs.get(key, "")
        child = node._get_node(key)
        if isinstance(child, DictConfig) and is_dataclass(OmegaConf.get_type(child)):
            head = class_doc(OmegaConf.get_type(child))
            same = head.lower().rstrip(".") == doc.lower().rstrip(".")
            rows.append((dotted, "", doc if not head or same else f"{doc}. {head}" if doc else head, True))
            rows.extend(key_rows(child, dotted + "."))
            continue
        if OmegaConf.is_missing(node, key):
            value = "???"
        elif OmegaConf.is_interpolation(node, key):
            value = child._value()
        else:
            value = _fmt(OmegaConf.to_container(node, resolve=False)[key] if isinstance(child, (DictConfig,))
                         or OmegaConf.is_list(child) else child._value())
        if key in choices:
            doc = f"{doc} ({' | '.join(choices[key])})" if doc else " | ".join(choices[key])
        rows.append((dotted, value, doc, False))
    return rows


def _matches(name: str, prefix: str) -> bool:
    return not prefix or name.startswith(prefix) or prefix.startswith(name + ".")


def render(cfg: DictConfig, groups, prefix: str = "") -> str:
    """The help text; with `prefix`, only the groups and keys whose name starts with it."""
    out = []
    group_rows = [g for g in groups if g[0].startswith(prefix)] if prefix else groups
    if group_rows:
        out.append("Groups (group=option; * the one this command uses):")
        width = max(len(g) for g, _, _ in group_rows)
        for group, chosen, options in group_rows:
            names = " ".join(f"*{o}" if o == chosen else o for o in options)
            out.append(textwrap.fill(names, WIDTH, initial_indent=f"  {group:<{width}}  ",
                                     subsequent_indent=" " * (width + 4), break_on_hyphens=False))
        out.append("")
    rows = [r for r in key_rows(cfg)
            if _matches(r[0], prefix) and (not r[3] or r[0].startswith(prefix))]
    keys = [r for r in rows if not r[3]]
    if keys:
        out.append("Keys (key=value as this command composes it: meaning; override with key=value):")
        width = min(48, max(len(f"{k}={v}") for k, v, _, _ in keys))
        current = ""  # the section the last row belonged to
        for key, value, doc, section in rows:
            if not section and "." not in key and current:  # top-level keys after a group's
                out.append("\ntop level:")
            current = key if section else key.rpartition(".")[0]
            if section:
                out.append("\n" + textwrap.fill(f"{key}: {doc}" if doc else f"{key}:", WIDTH, subsequent_indent="  "))
                continue
            entry = f"  {key}={value}"
            indent = " " * (width + 4)
            if len(entry) > width + 2:  # a long value: the meaning on the lines below
                out.append(entry)
                entry = ""
            out.append(textwrap.fill(doc or "-", WIDTH, initial_indent=f"{entry:<{width + 4}}",
                                     subsequent_indent=indent, break_on_hyphens=False))
    if not out:
        return f"no config group or key starts with '{prefix}' (python train.py --help lists them all)\n"
    return "\n".join(out).rstrip() + "\n"


def print_help(argv: Sequence[str], config_dir: str) -> int:
    """Prints the help `argv` asks for; the exit status (2: nothing matches the prefix or the
    overrides do not compose)."""
    prefix, overrides = help_request(argv)
    try:
        cfg = compose_for_help(config_dir, overrides)
    except Exception as e:  # Hydra's own messages say which override is wrong
        print(f"bad config: {e}", file=sys.stderr)
        return 2
    text = render(cfg, group_options(config_dir, cfg), prefix)
    if not prefix:
        text = USAGE + "\n" + text
    print(text.replace("python train.py", prog("train.py")), end="")
    return 2 if text.startswith("no config group or key") else 0


def print_enjoy_help(argv: Sequence[str], config_dir: str) -> int:
    """`python enjoy.py --help [prefix]`: enjoy's keys (sf_hydra.config.schema.EnjoyConfig) with their meanings."""
    prefix, overrides = help_request(argv)
    try:
        cfg = compose_for_help(config_dir, overrides, "enjoy")
    except Exception as e:
        print(f"bad config: {e}", file=sys.stderr)
        return 2
    text = render(cfg, [], prefix).replace("python train.py --help", "python enjoy.py --help")
    if not prefix:
        text = ENJOY_USAGE + "\n" + text
    print(text.replace("python enjoy.py", prog("enjoy.py")), end="")
    return 2 if text.startswith("no config group or key") else 0
