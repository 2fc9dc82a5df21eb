"""A resumed run keeps the config it was trained with.

A run folder holds the run's resolved config (`config.yaml`, written when a session starts). When the
folder also holds a checkpoint and the run resumes (`restart_behavior=resume`), the saved config is the
base (`resumed_config`): the command line's overrides typed now are applied to it, and nothing else of
the newly composed config is (a default changed since the run was saved, or a value a preset sets, stays
as saved). A typed override may change only keys that say how long, where to report and on what to run,
never what is trained: those keys (RESUMABLE) take their new values, except the hardware keys that change
what is trained (TRAINED_BY: the number of learner ranks, which sets how many frames a learner step averages
over and which samplers feed it, and the precision of the learner's arithmetic), which are compared like
any other; a typed override of any other key
that differs from the saved value is refused before any process starts, every such override at once,
with a ConfigError naming each key and both values (`restart_behavior=restart` or `overwrite` starts the
experiment anew instead). `train(cfg)` called with a composed config and no overrides treats every key of
`cfg` as typed (`check_resume_config`).

- The run's place (`run_dir`, `train_dir`, `experiment`, `sweep_name`) is not compared: a run folder
  may be moved or copied, and a sweep run's folder comes from its sweep.
- `seed` is compared: a different seed is a different experiment (a seed sweep gives each seed its own
  folder); a Slurm requeue or a re-run sweep composes the same config and passes.
- A key that the saved config lacks because it was saved by an older sf_hydra (a schema field added
  since) takes its default, or the value such a run behaved as (sf_hydra.config.saved: the saved config is
  migrated once, when it is read); a schema field that no longer exists is ignored. Under a plain dict node
  (`env.kwargs`, a part's own arguments) a key added or removed is a difference like any other.

Light on purpose (no torch): `train.py`'s command-line check calls it before Hydra writes into the folder.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import shlex
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from sf_hydra.config.saved import with_schema_defaults
from sf_hydra.config.trust import check_saved_config
from sf_hydra.config.validation import check_values
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.files import write_atomically
from sf_hydra.core.run_dir import LAST, checkpoint_dir, finished_run, learner_states

log = logging.getLogger("sf_hydra")

CONFIG = "config.yaml"
# Where the run lives, not what it computes.
# (trusted_targets: what the user trusts is said on each command line, never taken from a saved config)
PLACE = ("run_dir", "train_dir", "experiment", "sweep_name", "trusted_targets")
# Keys a resume may change (a trailing '.' is a whole group): budgets, reporting, hardware, checkpoints.
RESUMABLE = (
    "train_for_env_steps", "train_for_seconds", "train_until_avg_return", "logger.", "hardware.",
    "save_every_sec", "keep_checkpoints", "save_milestones_sec", "save_best_every_sec", "save_best_metric",
    "save_best_after", "load_checkpoint_kind", "restart_behavior",
    # Lightning's Trainer and the callbacks: how the run is driven, saved and reported (what they do to
    # training comes from keys compared above: pbt.*, selfplay.*); their paths follow the run folder.
    "trainer.", "callbacks.",
    "eval.",  # evaluation during training reads the weights; it changes nothing of training
    "sweep_objective",  # what the run returns to a sweeper
)
# Hardware keys that change what is trained: a resume keeps them as saved (the learner's Trainer copies are
# trainer.devices, trainer.num_nodes, trainer.precision, interpolated from them).
TRAINED_BY = ("hardware.devices", "hardware.num_nodes", "hardware.precision", "hardware.learner_precision",
              "trainer.devices", "trainer.num_nodes", "trainer.precision")
_ABSENT = object()


def resumable(key: str) -> bool:
    if key in TRAINED_BY:
        return False
    return key in PLACE or any(key == k or (k.endswith(".") and key.startswith(k)) for k in RESUMABLE)


def has_run_to_resume(run_dir: Path) -> bool:
    """A saved config and at least one checkpoint file (without loading it)."""
    folder = Path(run_dir) / "checkpoints"
    return (Path(run_dir) / CONFIG).is_file() and folder.is_dir() and any(folder.glob("*.ckpt"))


def _leaves(node, prefix: str = "") -> Dict[str, Any]:
    """{dotted key: value} of a plain container; lists and empty dicts are leaves."""
    out: Dict[str, Any] = {}
    for key, value in node.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_leaves(value, full + "."))
        else:
            out[full] = value
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, bool) != isinstance(b, bool):  # True == 1 in Python, not in a config
        return False
    return a == b


def _typed_parent(cfg: DictConfig, key: str) -> bool:
    """Whether `key`'s parent node in `cfg` is a schema dataclass (its keys are the schema's fields)."""
    parent = key.rpartition(".")[0]
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return isinstance(node, DictConfig) and dataclasses.is_dataclass(OmegaConf.get_type(node))


def _interpolated(cfg: DictConfig, key: str) -> bool:
    """Whether `key`'s value comes by interpolation: its own (algo.optimizer.lr), or a node's above it (a
    group a callback takes whole, `callbacks.summaries.logger: ${logger}`): it follows its source."""
    node = cfg
    try:
        for part in key.split("."):
            if not isinstance(node, DictConfig) or part not in node:
                return False
            if OmegaConf.is_interpolation(node, part):
                return True
            node = node[part]
    except Exception:
        return False
    return False


def config_differences(cfg: DictConfig, saved: DictConfig) -> Tuple[List[tuple], List[tuple], List[str]]:
    """(refused, accepted, ignored): (key, new value, saved value) of each difference of `cfg` from `saved`
    (keys in `cfg`'s order, refused ones with the keys users set first: interpolated ones last); ignored: keys
    of `saved` that the schema no longer has, or that `cfg` adds with their defaults."""
    new = _leaves(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    old = _leaves(OmegaConf.to_container(saved, resolve=True, enum_to_str=True))
    refused, accepted, ignored = [], [], []
    for key in list(new) + [k for k in old if k not in new]:
        before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if before is not _ABSENT and after is not _ABSENT and _same(before, after):
            continue
        if resumable(key):
            accepted.append((key, after, before))
        elif before is _ABSENT and _typed_parent(cfg, key):
            ignored.append(key)  # a schema field added since the run was saved: its default
        elif before is _ABSENT and key.split(".")[0] == "trainer":
            ignored.append(key)  # saved before the trainer group: its hardware.* sources, compared here, decide
        elif after is _ABSENT and OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT and _typed_parent(cfg, key):
            ignored.append(key)  # a schema field that no longer exists
        else:
            refused.append((key, after, before))
    refused.sort(key=lambda d: _interpolated(cfg, d[0]))  # stable: algo.learning_rate before algo.optimizer.lr
    return refused, accepted, ignored


def _shown(value) -> Any:
    return "<absent>" if value is _ABSENT else value


def load_saved(run_dir: Path) -> DictConfig:
    """The saved config of the run in `run_dir`; a ConfigError naming the file (a hand-edited or cut file is the
    user's input: exit status 2) and how to start anew when it is not a YAML mapping."""
    try:
        saved = OmegaConf.load(run_dir / CONFIG)
    except Exception as e:  # not yaml, or not a mapping: say so rather than resume blind
        raise ConfigError(CONFIG, str(run_dir / CONFIG), (
            f"the saved config of the run to resume, as YAML that parses (reading it failed: {type(e).__name__}: "
            f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}); restore it, or "
            "restart_behavior=restart (moves the old run aside) or restart_behavior=overwrite starts anew")) from None
    if not isinstance(saved, DictConfig):
        raise ConfigError(CONFIG, str(run_dir / CONFIG), "the saved config of the run to resume, a YAML mapping; "
                          "restore it, or restart_behavior=restart or restart_behavior=overwrite starts anew")
    return saved


def load_checked(cfg: DictConfig, run_dir: Path) -> DictConfig:
    """The saved config of the run `cfg` resumes, once the code it names is checked (before any of it resolves:
    sf_hydra's own parts, what this command line names, what the user trusts, what the user's own training of the
    run recorded; sf_hydra.config.trust) and its values that read the environment resolve; migrated to today's
    schema (the keys an older sf_hydra did not save: sf_hydra.config.saved)."""
    saved = load_saved(run_dir)
    check_saved_config(saved, str(run_dir / CONFIG), cfg.trusted_targets, composed=cfg, run_dir=run_dir)
    _check_environment(saved, run_dir / CONFIG)
    return with_schema_defaults(saved)


def _check_environment(saved: DictConfig, path: Path) -> None:
    """ConfigError naming the first value of a saved config that reads an environment variable no longer set (the
    config keeps such values as their interpolation: save_config)."""
    try:
        OmegaConf.to_container(saved, resolve=True)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "config"
        written = OmegaConf.to_container(saved, resolve=False)
        raise ConfigError(key, next((v for k, v in _leaves(written).items() if k == key), None), (
            f"a value that resolves: {path} keeps it as written and resolving it failed "
            f"({str(e).strip().splitlines()[0]}); set the environment variable it reads, as for the session that "
            f"saved it, or {START_ANEW}")) from None


def resumes(cfg: DictConfig) -> bool:
    """Whether `cfg` resumes a run: restart_behavior=resume and its folder holds a saved config and a checkpoint."""
    try:
        return str(cfg.restart_behavior) == "resume" and has_run_to_resume(Path(cfg.run_dir).absolute())
    except OmegaConfBaseException:  # a run folder named by a missing value (env.id): the config stage says which
        return False


MAY_CHANGE = ("only budgets (train_for_env_steps, train_for_seconds, train_until_avg_return), logger.*, hardware.*, "
              "trainer.*, callbacks.*, eval.*, save_*, keep_checkpoints, load_checkpoint_kind and sweep_objective may "
              "change, but not hardware.devices, hardware.num_nodes (the learner ranks: how many frames a learner step "
              "learns from) nor hardware.precision, hardware.learner_precision (the learner's arithmetic)")
START_ANEW = ("restart_behavior=restart (moves the old run aside) or restart_behavior=overwrite (deletes it) starts "
              "anew with this config; experiment=<name> starts a new run in its own folder")


def check_resume_config(cfg: DictConfig, run_dir: Path) -> None:
    """ConfigError when `cfg` would resume the run in `run_dir` with a config that differs from its saved
    one beyond RESUMABLE keys (every key of `cfg` counts as typed: `resumed_config` has already put the
    saved values under the keys the command line did not type). Nothing to check for a new run,
    restart/overwrite, or a folder without a checkpoint (that run starts anew and saves its config)."""
    run_dir = Path(run_dir)
    if str(cfg.restart_behavior) != "resume" or not has_run_to_resume(run_dir):
        return
    saved = load_checked(cfg, run_dir)
    refused, accepted, ignored = config_differences(cfg, saved)
    if refused:
        key, after, before = refused[0]
        others = "; ".join(f"{k}={_shown(a)!r} (saved: {_shown(b)!r})" for k, a, b in refused[1:6])
        more = f" (+{len(refused) - 6} more)" if len(refused) > 6 else ""
        raise ConfigError(key, _shown(after), (
            f"{_shown(before)!r}, as saved in {run_dir / CONFIG} for the run this command resumes. A resumed run "
            f"keeps its config; {MAY_CHANGE}. {START_ANEW}" + (f". Also different: {others}{more}" if others else "")))
    changed = [f"{k}: {_shown(b)!r} -> {_shown(a)!r}" for k, a, b in accepted if k.split(".")[0] not in PLACE]
    if changed:
        log.info("resuming %s with its saved config; changed: %s", run_dir, ", ".join(changed))
    if ignored:
        log.info("keys not in the saved config (an older or newer sf_hydra saved it): %s", ", ".join(ignored))


class Composer(Protocol):
    """Composes the config as the run's command line does, with other overrides (sf_hydra.app.bad_input.Composer,
    or Hydra's compose inside a running job)."""

    def compose(self, overrides: Sequence[str]) -> DictConfig: ...

    def group_exists(self, name: str) -> bool: ...


def _plain_leaves(cfg: DictConfig) -> Dict[str, Any]:
    """{dotted key: resolved value} of a config, Hydra's own node left out."""
    if "hydra" in cfg:  # popped before resolving: Hydra's node resolves only inside a running job
        cfg = copy.deepcopy(cfg)
        with open_dict(cfg):
            cfg.pop("hydra")
    return _leaves(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


def _placed(key: str) -> bool:
    return key.split(".")[0] in PLACE


def _differs(a: Dict[str, Any], b: Dict[str, Any], key: str) -> bool:
    return not (key in a and key in b and _same(a[key], b[key]))


def _group_keys(line: str, group: str, overrides: Sequence[str], now: Dict[str, Any], saved: Dict[str, Any],
                composer: Composer) -> List[str]:
    """The keys a group option sets (`env=doom/basic`, `algo=ppo`, `+experiment=<preset>`): those where the
    config composed without it differs; none when it picks what the run was saved with (every key under its
    node, `env.*` for `env=...`, as saved: a default it sets that changed since stays as saved)."""
    node = group.replace("/", ".")
    own = [k for k in now if _under(k, node)]
    if own and not any(_differs(now, saved, k) for k in own):
        return []
    try:
        without = _plain_leaves(composer.compose([o for o in overrides if o != line]))
    except Exception:  # another override needs this option (one of its keys): its node, or everything
        return own or [k for k in now if _differs(now, saved, k)]
    return [k for k in list(now) + [k for k in without if k not in now] if _differs(now, without, k)]


def typed_keys(overrides: Sequence[str], now: Dict[str, Any], saved: Dict[str, Any],
               composer: Composer) -> Dict[str, str]:
    """{key: the override, as typed, that sets it}: a `key=value` override sets its key and every key under it;
    a group option the keys it changes (_group_keys). Hydra's own keys and the run's place are left out."""
    parser, typed = OverridesParser.create(), {}
    for line in overrides:
        ov = parser.parse_override(line)
        key = ov.key_or_group
        if key.startswith("hydra") or _placed(key):
            continue
        try:
            group = composer.group_exists(key.replace(".", "/"))
        except Exception:
            group = False
        for k in _group_keys(line, key, overrides, now, saved, composer) if group else [key]:
            typed.setdefault(k, line)
    return typed


def _typed_by(key: str, typed: Dict[str, str]) -> Optional[str]:
    return next((line for k, line in typed.items() if _under(key, k)), None)


def _conflicts(cfg: DictConfig, now: Dict[str, Any], saved: Dict[str, Any], typed: Dict[str, str]) -> List[tuple]:
    """(key, typed value, saved value, the override) of each typed key that a resume may not change."""
    out = []
    for key in list(now) + [k for k in saved if k not in now]:
        line = _typed_by(key, typed)
        if line is None or resumable(key) or not _differs(now, saved, key):
            continue
        if key not in saved and _typed_parent(cfg, key):
            continue  # a field of another env family's schema than the saved run's: env.family is refused
        out.append((key, now.get(key, _ABSENT), saved.get(key, _ABSENT), line))
    return out


def _refuse(conflicts: List[tuple], run_dir: Path) -> ConfigError:
    def said(key, line):
        return "" if line.lstrip("+~").startswith(f"{key}=") else f", from {line}"

    key, after, before, line = conflicts[0]
    others = "; ".join(f"{k}={_shown(a)!r} (saved: {_shown(b)!r}{said(k, t)})" for k, a, b, t in conflicts[1:10])
    more = f" (+{len(conflicts) - 10} more)" if len(conflicts) > 10 else ""
    return ConfigError(key, _shown(after), (
        f"{_shown(before)!r}, as saved in {run_dir / CONFIG} for the run this command resumes{said(key, line)}. "
        f"A resumed run keeps its saved config and takes only what is typed now; {MAY_CHANGE}. {START_ANEW}"
        + (f". Also refused: {others}{more}" if others else "")))


def _set(cfg: DictConfig, key: str, value) -> None:
    OmegaConf.update(cfg, key, value, merge=False, force_add=True)


def _delete(cfg: DictConfig, key: str) -> None:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    with open_dict(node):
        del node[leaf]


def _rebased(cfg: DictConfig, saved: Dict[str, Any], typed: Dict[str, str],
             written: Dict[str, Any]) -> Tuple[DictConfig, List[tuple]]:
    """A copy of `cfg` holding the saved value of every key the command line did not type, and the keys so
    kept (key, composed value, saved value). Interpolations are left for last and kept where they resolve to
    the saved value (algo.optimizer.lr follows algo.learning_rate); a resumable one keeps following its
    source (the callbacks' paths follow the run folder). A saved value is taken as `written` in config.yaml
    (a value from an environment variable: its interpolation, never the value)."""
    out, kept = _with_saved_env_schema(copy.deepcopy(cfg), saved), []
    for interpolations in (False, True):
        now = _plain_leaves(out)
        for key in list(now) + [k for k in saved if k not in now]:
            if _placed(key) or _typed_by(key, typed) is not None or not _differs(now, saved, key):
                continue
            interpolated = key in now and _interpolated(out, key)
            if interpolated != interpolations or (interpolated and resumable(key)):
                continue
            if key not in saved:  # under a plain mapping: dropped (schema keys it lacked were migrated in)
                if not _typed_parent(out, key):
                    _delete(out, key)
                    kept.append((key, now[key], _ABSENT))
            elif key not in now and _built_in_part(now, key):
                continue  # an argument a built-in callback no longer takes: its node is today's
            elif key in now or not _typed_parent(out, key):  # (a field the schema no longer has is left out)
                _set(out, key, written.get(key, saved[key]))
                kept.append((key, now.get(key, _ABSENT), written.get(key, saved[key])))
    return out, kept


def _with_saved_env_schema(out: DictConfig, saved: Dict[str, Any]) -> DictConfig:
    """`out` with an env node of the saved run's family's schema where the command line composed another family
    (its env left untyped, the default env composed: `train.py experiment=<a Doom run>`), so that the family's
    own keys (Doom's measurements, resolution, ...) are taken as saved instead of left out as fields the
    composed schema lacks: the node is the saved env's values over the family's schema. A family typed now
    that differs from the saved one is refused by the comparison."""
    from sf_hydra.config.store import env_schemas

    family = saved.get("env.family")
    node = env_schemas().get(family) if family is not None else None
    if node is None or OmegaConf.select(out, "env.family") == family:
        return out
    env: Dict[str, Any] = {}
    for key, value in saved.items():
        parts = key.split(".")
        if parts[0] != "env" or len(parts) < 2 or parts[1] not in {f.name for f in dataclasses.fields(node)}:
            continue  # not the env's, or a field the schema no longer has
        where = env
        for part in parts[1:-1]:
            where = where.setdefault(part, {})
        where[parts[-1]] = value
    with open_dict(out):
        out.env = OmegaConf.merge(OmegaConf.structured(node), env)
    return out


def _built_in_part(now: Dict[str, Any], key: str) -> bool:
    """Whether `key` lies in a node `callbacks.<name>` that today's composition has: a callback sf_hydra builds,
    whose arguments are today's (a run saved by an older sf_hydra may hold arguments since dropped); a callback
    only the saved run has (the user's own, added on its command line) is kept whole."""
    parts = key.split(".")
    if parts[0] != "callbacks" or len(parts) < 3:
        return False
    prefix = f"callbacks.{parts[1]}."
    return any(k.startswith(prefix) for k in now)


def resumed_config(cfg: DictConfig, overrides: Optional[Sequence[str]], composer: Optional[Composer]) -> DictConfig:
    """The config a resumed run trains with: its saved config, with the command line's `overrides` (as typed,
    Hydra's syntax) applied; `cfg` (the command line composed) itself for a new run, restart/overwrite, or
    when the overrides are not known (None: `check_resume_config` then treats every key as typed). Raises a
    ConfigError naming every typed override a resume may not take (a key outside RESUMABLE whose value
    differs from the saved one). The command line's own values are checked first (check_values): a value that
    is invalid is refused as such, whatever the run folder holds."""
    if overrides is None or composer is None or not resumes(cfg):
        return cfg
    check_values(cfg)  # what is typed now, as a value: refused as invalid before it is compared with the saved one
    run_dir = Path(cfg.run_dir).absolute()
    saved_cfg = load_checked(cfg, run_dir)
    saved = _plain_leaves(saved_cfg)
    now = _plain_leaves(cfg)
    typed = typed_keys(overrides, now, saved, composer)
    conflicts = _conflicts(cfg, now, saved, typed)
    conflicts.sort(key=lambda c: list(overrides).index(c[3]))  # in the order they were typed
    if conflicts:
        raise _refuse(conflicts, run_dir)
    out, kept = _rebased(cfg, saved, typed, _leaves(OmegaConf.to_container(saved_cfg, resolve=False)))
    if kept:
        shown = ", ".join(f"{k}={_shown(b)!r} (composed now: {_shown(a)!r})" for k, a, b in kept[:8])
        log.info("resuming %s from its saved config; kept as saved, not typed now: %s%s", run_dir, shown,
                 f" (+{len(kept) - 8} more)" if len(kept) > 8 else "")
    return out


def finished(cfg: DictConfig) -> Optional[Tuple[dict, str]]:
    """(saved summary, what to say) when `cfg` resumes a run that already reached one of `cfg`'s budgets
    (sf_hydra.core.run_dir.finished_run); None otherwise (a new run, restart/overwrite, budget left)."""
    if not resumes(cfg):
        return None
    return finished_run(Path(cfg.run_dir).absolute(), cfg.train_for_env_steps, cfg.train_for_seconds,
                        cfg.train_until_avg_return, cfg.logger.stats_avg)


def save_config(cfg: DictConfig, run_dir: Path) -> Path:
    """`config.yaml`: the config resolved, except the values that come from environment variables, which keep
    their interpolation as written (environment_free): a token handed over in the environment is never written
    in clear, and a resume resolves it again. Written through the one writer (sf_hydra.core.files: never half
    written, durable)."""
    path = Path(run_dir) / CONFIG
    text = OmegaConf.to_yaml(OmegaConf.create(environment_free(cfg)))
    write_atomically(path, lambda tmp: Path(tmp).write_text(text))
    return path


ENV_RESOLVER = "oc.env"  # OmegaConf's resolver that reads an environment variable
_FROM_ENV = "@@sf_hydra: a value from the environment@@"  # stands for such a value while the others are resolved


def reads_environment(value: Any) -> bool:
    """Whether a value as written (a string, or a container of them) reads an environment variable."""
    return ENV_RESOLVER in str(value)


def without_environment(node: Any, replacement: str) -> Any:
    """A plain container as written with each string that reads an environment variable replaced."""
    if isinstance(node, dict):
        return {k: without_environment(v, replacement) for k, v in node.items()}
    if isinstance(node, list):
        return [without_environment(v, replacement) for v in node]
    return replacement if isinstance(node, str) and reads_environment(node) else node


def environment_keys(node: Any, prefix: str = "") -> List[str]:
    """The dotted keys of a plain container as written whose strings read an environment variable."""
    if isinstance(node, (dict, list)):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        return [k for key, value in items for k in environment_keys(value, f"{prefix}{key}.")]
    return [prefix[:-1]] if isinstance(node, str) and reads_environment(node) else []


def environment_free(cfg: DictConfig) -> Any:
    """`cfg` resolved, as a plain container, except each value that comes from an environment variable (an
    `${oc.env:...}` of its own, or an interpolation of such a value): that one stays as written. Which values
    those are is found by resolving the config with every environment read replaced by a marker."""
    written = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    resolved = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if not reads_environment(written):
        return resolved
    marked = without_environment(written, _FROM_ENV)
    try:
        marked = OmegaConf.to_container(OmegaConf.create(marked), resolve=True)
    except OmegaConfBaseException:  # a resolver that took the marker for a value: the direct reads only
        pass
    return _as_written_where_marked(resolved, written, marked)


def _as_written_where_marked(resolved: Any, written: Any, marked: Any) -> Any:
    if isinstance(marked, dict) and isinstance(written, dict):
        return {k: _as_written_where_marked(resolved[k], written[k], marked[k]) for k in resolved}
    if isinstance(marked, list) and isinstance(written, list):
        return [_as_written_where_marked(*values) for values in zip(resolved, written, marked)]
    return written if _FROM_ENV in str(marked) else resolved


def resumed_run(run_dir: Path, prog: str, now: Optional[float] = None) -> str:
    """What a resume continues, said before Hydra rewrites the folder's `.hydra/`: the env steps and the age
    of the newest checkpoint, and the command of the run's last session (its `.hydra/overrides.yaml`), so
    that a command that names a folder another command made (a Sample Factory line's --experiment) does not
    continue that run unseen. `now`: the time to measure the age against (time.time() when None)."""
    parts = []
    newest = _newest_checkpoint(run_dir)
    if newest is not None:
        path, steps, written = newest
        age = (time.time() if now is None else now) - written
        what = f"its newest checkpoint {path.name}" if steps is None else f"{steps} env steps (its newest checkpoint"
        parts.append(f"{what}, written {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(written))}, "
                     f"{_ago(age)} ago{')' if steps is not None else ''}")
    command = _last_command(run_dir)
    if command is not None:
        parts.append(f"its last session ran: {prog} {command}")
    said = f": {'; '.join(parts)}" if parts else ""
    return f"resuming the run in {run_dir}{said}. Not the run meant? {START_ANEW}"


def _newest_checkpoint(run_dir: Path) -> Optional[Tuple[Path, Optional[int], float]]:
    """(file, env steps, modification time) of the run's most recently written learner state (run_dir's
    learner_states, the one a resume starts from unless it is damaged); the env steps are read off a numbered
    file's name (nothing is loaded), None for a best checkpoint. None when the run has none."""
    states = [p for p in learner_states(checkpoint_dir(Path(run_dir))) if p.name != LAST]
    if not states:
        return None
    path = max(states, key=lambda p: p.stat().st_mtime)
    digits = path.stem[len("checkpoint_"):] if path.stem.startswith("checkpoint_") else ""
    return path, int(digits) if digits.isdigit() else None, path.stat().st_mtime


def _last_command(run_dir: Path) -> Optional[str]:
    """The overrides of the run's last session as one shell line (Hydra's `.hydra/overrides.yaml`), or None."""
    try:
        overrides = yaml.safe_load((Path(run_dir) / ".hydra" / "overrides.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(overrides, list):
        return None
    return shlex.join(str(o) for o in overrides)


def _ago(seconds: float) -> str:
    """A duration in the largest whole unit (seconds, minutes, hours, days)."""
    seconds = max(0.0, seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("min", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count > 1 and unit != 'min' else ''}"
    return f"{int(seconds)} s"
