"""Every file and module the docs name is there: README.md, the pages of docs/ (the generated ones included), the
docstrings and comments under src/ and of the tests, the benchmarks, cluster/ and examples/ (their scripts and
READMEs), the tests' READMEs, conf/ and experiments/, pyproject.toml, mkdocs.yml and CI's script name source files
(`src/sf_hydra/app/checks.py`, `sf_hydra/core/trajectory.py`, `config/schema.py` or `sample_factory/flags.py` under
the package, `hydra_plugins/sf_hydra_plugins/...py`, `tests/...py`, `benchmarks/...`, `cluster/...`), bare file
names (`checks.py`) and dotted names (`sf_hydra.core.door.SamplerDoor`, `python -m sf_hydra.app.import_sf_run`,
`sf_hydra.app.cli:train_main`); a file moved or renamed leaves a stale name behind, which this finds.

How strict each check is, and why:
- A path resolves from the repository's root, or from src/ (`sf_hydra/...`, `hydra_plugins/...`), or, when it
  starts with a package folder of src/sf_hydra, to the one module of the package whose path ends with it
  (`config/schema.py`, `sample_factory/flags.py`, `atari/games.py`).
- A bare file name (`checks.py`) must be the name of a file of the repository (or of a peer's script the
  benchmarks name, OTHERS_FILES): module file names are unique (test_module_names.py), but a bare name says
  nothing of its folder, so only a name no file has any more is told.
- A dotted name resolves when its longest prefix that is a module of src/ (a .py file or a package) defines the
  next name at its top level (a def, a class, an assignment or an import; a class's own attribute after it), read
  from the source, nothing imported (a module may need an extra). `module:name` (an entry point) and
  `<path>.py:name` are read the same way; `module:Env-v0` is a gym id, not checked beyond its module.
- A path to a module of src/ followed by a capitalised name (`sampler/messages.py Trajectories`,
  `core/game_results.py` `Game`): the module must define it, when the name is defined somewhere in the package or
  reads as code (`StartDecision`, `SHAPING_UNITS`); a capitalised word of the prose after a path is let be.
- A dotted name without the package's prefix, in backticks (`checks.check_family`, `config.validation.validate`),
  is read from the package or from the one module of that file stem (module file names are unique) and must
  resolve; not checked when it starts with a config key (`env.id`), ends with a file's suffix (`config.yaml`), or
  starts with a name the docs use for a variable (NOT_MODULES: `policy.initial_state(n)`, `recipe.model`).
- Not checked: lowercase words after a path, a short dotted name outside backticks, and the tests' code (a test
  names a missing module on purpose; its docstrings and comments are read).
A name shown as where something was, in the form "`old` is `new`" (docs/layout.md's moves), must no longer
resolve, and the name after it must."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from functools import lru_cache
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PACKAGE = SRC / "sf_hydra"
MODULES = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py"))
# the package's folders that hold modules (app, sample_factory, atari, ...): a short path starts with one
FOLDERS = sorted({part for module in MODULES for part in module.split("/")[:-1]})
_FILE = r"[\w/.-]*\w\.(?:py|sh|md|yaml|toml|txt|json|npz)"
# a path starts a word: not inside a longer path (~/.config/sf_hydra/...), a placeholder (<family>/) or a URL
PATHS = re.compile(rf"(?<![\w/.<>~-])((?:src/)?(?:sf_hydra|hydra_plugins)/[\w/]*\w\.py|src/[\w/]+/"
                   rf"|(?:{'|'.join(FOLDERS)})/[\w/]*\w\.py|(?:tests|benchmarks|cluster|examples|docs)/{_FILE})"
                   r"(?![\w<>])")
BARE = re.compile(r"(?<![\w/.<>~-])(\w+\.py)(?![\w<>/-])")
DOTTED = re.compile(r"(?<![\w.])(?:sf_hydra|hydra_plugins\.sf_hydra_plugins)(?:\.[A-Za-z_]\w*)+")
# `module:name` (an entry point) and `<path>.py:name`; `module:Env-v0` is a gym id, not a name
NAMED_AFTER_COLON = re.compile(rf"({DOTTED.pattern}|{PATHS.pattern}):([A-Za-z_]\w*)(?![\w-])")
# `checks.check_family`, `config.validation.check_values()`: a dotted name without the package, in backticks
SHORT_DOTTED = re.compile(r"`([a-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`")
FILE_SUFFIXES = {"py", "md", "yaml", "json", "jsonl", "log", "txt", "csv", "png", "npz", "tgz", "ckpt", "pt", "onnx",
                 "sh", "toml", "key", "conf"}  # `config.yaml`, `train.log`: a file's name, not a module's
# a path, then a capitalised name: `sampler/messages.py Trajectories`, `core/game_results.py` `Game`
NAMED_AFTER_PATH = re.compile(rf"{PATHS.pattern}`?,? `?([A-Z]\w*)\b")
# CamelCase with a capital inside (StartDecision) or UPPER_SNAKE (SHAPING_UNITS): code, not a word of the prose
CODE_NAME = re.compile(r"[A-Z][a-z0-9]+[A-Z]\w*|[A-Z][A-Z0-9]*_[A-Z0-9_]+")
# first names of `a.b` that are variables in the docs, not modules: `policy.initial_state(n)` (a Policy's method),
# `profile.startup` (a section of a run's summary.json)
NOT_MODULES = {"policy", "profile", "recipe"}
MOVED = re.compile(r"`([^`]+)`\s+is\s+`([^`]+)`")
MODULE_ATTRIBUTES = {"__file__", "__name__", "__path__", "__spec__", "__doc__"}  # every module has them
# the peers' scripts the benchmarks run and name (CleanRL's, LeanRL's, PufferLib's, Sample Factory's, a setup.py)
OTHERS_FILES = {"ppo.py", "ppo_continuous_action.py", "ppo_continuous_action_torchcompile.py", "pufferl.py",
                "setup.py", "train_gym_env.py", "ppo_atari.py", "ppo_mujoco.py"}
SOURCE_FOLDERS = ("src", "tests", "benchmarks", "cluster", "examples")


def docstrings_and_comments(source: str) -> str:
    """A Python file's docstrings and comments, one after another (the code left out)."""
    found = [ast.get_docstring(node, clean=False) for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    found += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return "\n".join(text for text in found if text)


@lru_cache(maxsize=None)
def texts() -> dict:
    """{file relative to the repository: its text} for README.md, docs/, src/, the scripts and READMEs of
    benchmarks/, cluster/ and examples/, conf/ and experiments/, the repository's own configuration and CI script,
    and the tests' READMEs, docstrings and comments (not the tests' code, nor tests/data/: Sample Factory's README
    names its own files)."""
    files = [REPO / "README.md", REPO / "train.py", REPO / "enjoy.py", REPO / "pyproject.toml", REPO / "mkdocs.yml",
             *(REPO / ".ci").rglob("*"), *(REPO / "docs").rglob("*.md"), *SRC.rglob("*.py"),
             *(REPO / "tests").rglob("*.md"), *(REPO / "conf").rglob("*.yaml"), *(REPO / "experiments").rglob("*.yaml")]
    files += [f for folder in ("benchmarks", "cluster", "examples") for f in (REPO / folder).rglob("*")
              if f.suffix in (".py", ".md", ".sh")]
    found = {str(f.relative_to(REPO)): f.read_text() for f in sorted(files)
             if f.is_file() and not f.relative_to(REPO).as_posix().startswith("tests/data/")}
    found.update({str(f.relative_to(REPO)): docstrings_and_comments(f.read_text())
                  for f in sorted((REPO / "tests").rglob("*.py"))})
    return found


@lru_cache(maxsize=None)
def repository_file_names() -> frozenset:
    """The names of the files under the repository's source folders and at its root."""
    names = {f.name for f in REPO.iterdir() if f.is_file()}
    for folder in SOURCE_FOLDERS:
        for root, dirs, files in os.walk(REPO / folder):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
            names.update(files)
    return frozenset(names)


def short_path_file(path: str, modules: Iterable[str] = MODULES) -> Optional[Path]:
    """The module of src/sf_hydra a path relative to one of the package's folders names (`config/schema.py`,
    `sample_factory/flags.py`): the module at that path under the package, else the one whose path ends with it;
    None if there is none, or several."""
    modules = list(modules)
    if path in modules:
        return PACKAGE / path
    ending = [m for m in modules if m.endswith("/" + path)]
    return PACKAGE / ending[0] if len(ending) == 1 else None


def path_file(path: str) -> Optional[Path]:
    """The file a path as the docs write it names: from the repository's root, from src/ (sf_hydra/...,
    hydra_plugins/...), or from one of the package's folders (see short_path_file); None if there is none."""
    if path.startswith(("sf_hydra/", "hydra_plugins/")):
        found = SRC / path
    elif path.split("/", 1)[0] in FOLDERS:
        found = short_path_file(path)
    else:
        found = REPO / path
    return found if found is not None and found.exists() else None


def path_exists(path: str) -> bool:
    """Whether a path as the docs write it names a file or folder of the repository (see path_file)."""
    return path_file(path) is not None


def module_file(parts: Sequence[str]) -> Optional[Path]:
    """The source of module `a.b.c` under src/ (a .py file, or a package's __init__.py); None if there is none."""
    base = SRC.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _bound(body) -> dict:
    """{name: its node} of what a module's or a class's body binds."""
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({t.id: node for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.If, ast.Try)):  # `if TYPE_CHECKING:` / `try: import x`
            names.update(_bound(node.body))
    return names


@lru_cache(maxsize=None)
def _module_names(path: Path) -> dict:
    return _bound(ast.parse(path.read_text()).body)


def _served(names: dict) -> Sequence[str]:
    """What a module's `__getattr__` serves: the names of its `__all__` (any name, without one)."""
    node = names.get("__all__")
    if not isinstance(node, (ast.Assign, ast.AnnAssign)):
        return _Anything()
    return ast.literal_eval(node.value)


class _Anything:
    def __contains__(self, name) -> bool:
        return True


def defines(source: Path, rest: Sequence[str]) -> bool:
    """Whether a module's source defines `rest` (a name, or a class and its attribute) at its top level."""
    names = _module_names(source)
    if not rest or "*" in names or (len(rest) == 1 and rest[0] in MODULE_ATTRIBUTES):
        return True
    node = names.get(rest[0])
    if node is None:
        return "__getattr__" in names and rest[0] in _served(names)
    return len(rest) == 1 or not isinstance(node, ast.ClassDef) or rest[1] in _bound(node.body)


def resolves(name: str) -> bool:
    """Whether a dotted name is a module of src/ or a name one of them defines (module docstring)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        source = module_file(parts[:i])
        if source is not None:
            return defines(source, parts[i:])
    return False


def named_resolves(where: str, name: str) -> bool:
    """Whether `where` (a dotted module or a path to a module of src/) defines `name`; a `where` that names nothing,
    or a script outside src/, is let be (the path and dotted-name checks tell the first)."""
    if "/" not in where:
        return not resolves(where) or resolves(f"{where}.{name}")
    source = path_file(where)
    return source is None or SRC not in source.parents or source.suffix != ".py" or defines(source, [name])


@lru_cache(maxsize=None)
def package_names() -> frozenset:
    """Every name a module of the package defines at its top level."""
    return frozenset(name for module in MODULES for name in _module_names(PACKAGE / module))


def names_after(text: str) -> List[tuple]:
    """(where, name) for each `module:name`, `<path>.py:name`, and name of code written after a path: one of ours, or
    one that reads as code (CODE_NAME)."""
    pairs = [(m.group(1), m.groups()[-1]) for m in NAMED_AFTER_COLON.finditer(text)]
    pairs += [(path, name) for path, name in NAMED_AFTER_PATH.findall(text)
              if path.endswith(".py") and (name in package_names() or CODE_NAME.fullmatch(name))]
    return pairs


@lru_cache(maxsize=None)
def module_stems() -> dict:
    """{file stem: the module's dotted name under sf_hydra} of the modules whose stem no other module has."""
    stems = {}
    for module in MODULES:
        stem = module.rsplit("/", 1)[-1][:-len(".py")]
        stems[stem] = None if stem in stems else module[:-len(".py")].split("/")
    return {stem: parts for stem, parts in stems.items() if parts is not None and stem != "__init__"}


@lru_cache(maxsize=None)
def config_keys() -> frozenset:
    """The config's top-level keys (the fields of the train and enjoy configs, conf/'s groups): `env.id` and
    `pbt.workspace` are keys, not names in modules env.py and pbt.py."""
    schema = _module_names(PACKAGE / "config" / "schema.py")
    fields = {node.target.id for config in ("TrainConfig", "EnjoyConfig") for node in schema[config].body
              if isinstance(node, ast.AnnAssign)}
    return frozenset(fields | {p.name for p in (REPO / "conf").iterdir() if p.is_dir()})


def short_dotted_resolves(name: str) -> Optional[bool]:
    """Whether a dotted name written without the package (`checks.check_family`, `config.validation.validate`)
    resolves, from the package or from the one module of that file stem; None where it is not checked: no module
    of ours starts it, or it is a config key (`env.id`), a file's name (`config.yaml`) or a variable's attribute
    (NOT_MODULES)."""
    parts = name.split(".")
    if parts[0] in config_keys() or parts[0] in NOT_MODULES or parts[-1] in FILE_SUFFIXES:
        return None
    bases = [["sf_hydra"]] if module_file(["sf_hydra", parts[0]]) is not None else []
    if parts[0] in module_stems():
        bases.append(["sf_hydra", *module_stems()[parts[0]][:-1]])
    return any(resolves(".".join([*base, *parts])) for base in bases) if bases else None


def moved_names(text: str) -> set:
    """The dotted names a text shows as where something was ("`old` is `new`")."""
    return {name for match in MOVED.finditer(text) for name in DOTTED.findall(match.group(1))}


def test_every_path_the_docs_name_exists():
    stale = sorted({f"{file}: {path}" for file, text in texts().items() for path in PATHS.findall(text)
                    if not path_exists(path)})
    assert not stale, "paths named in the docs (and docstrings) that are not in the repository:\n" + "\n".join(stale)


def test_every_bare_file_name_is_a_file_of_the_repository():
    """(The tests' docstrings are left out: a test names the files it writes.)"""
    known = repository_file_names() | OTHERS_FILES
    stale = sorted({f"{file}: {name}" for file, text in texts().items() if not file.startswith("tests/")
                    for name in BARE.findall(text) if name not in known})
    assert not stale, "file names in the docs (and docstrings) that no file of the repository has:\n" + "\n".join(stale)


def test_every_dotted_name_the_docs_name_resolves():
    stale = sorted({f"{file}: {name}" for file, text in texts().items()
                    for name in set(DOTTED.findall(text)) - moved_names(text) if not resolves(name)})
    assert not stale, "dotted names in the docs (and docstrings) that name no module or attribute:\n" + "\n".join(stale)


def test_every_name_after_a_module_or_path_is_defined_there():
    stale = sorted({f"{file}: {where} {name}" for file, text in texts().items() for where, name in names_after(text)
                    if not named_resolves(where, name)})
    assert not stale, "names the docs (and docstrings) place in a module that does not define them:\n" + \
        "\n".join(stale)


def test_every_dotted_name_without_the_package_resolves():
    stale = sorted({f"{file}: {name}" for file, text in texts().items() for name in SHORT_DOTTED.findall(text)
                    if short_dotted_resolves(name) is False})
    assert not stale, "names in the docs (and docstrings) that name no module or attribute:\n" + "\n".join(stale)


def test_a_moved_name_is_gone_and_its_new_name_resolves():
    pairs = [(old, new) for text in texts().values() for match in MOVED.finditer(text)
             for old, new in [(DOTTED.findall(match.group(1)), DOTTED.findall(match.group(2)))] if old and new]
    assert len(pairs) >= 3, pairs  # docs/layout.md's moves
    wrong = [(old, new) for old, new in pairs if any(map(resolves, old)) or not all(map(resolves, new))]
    assert not wrong, f"`old` is `new`: the old name must be gone and the new one resolve: {wrong}"


def test_the_names_are_found_and_checked():
    """The patterns find the names in the forms the docs write them, and a stale one is told from a good one."""
    found = PATHS.findall("`src/sf_hydra/app/checks.py`, sf_hydra/core/trajectory.py (config/schema.py) "
                          "tests/ddp/test_torchrun_nodes.py; ~/.config/sf_hydra/seal.key, envs/<family>/family.py, "
                          "sample_factory/flags.py hydra_plugins/sf_hydra_plugins/atari_games.py")
    assert found == ["src/sf_hydra/app/checks.py", "sf_hydra/core/trajectory.py", "config/schema.py",
                     "tests/ddp/test_torchrun_nodes.py", "sample_factory/flags.py",
                     "hydra_plugins/sf_hydra_plugins/atari_games.py"], found
    assert all(map(path_exists, found))
    assert not path_exists("src/sf_hydra/checks.py") and path_exists("src/sf_hydra/app/checks.py")
    assert not path_exists("core/games.py") and not path_exists("sample_factory/no_such.py")
    assert short_path_file("atari/games.py") == PACKAGE / "envs/atari/games.py"
    assert short_path_file("x/family.py", ["envs/x/family.py", "envs/y/family.py"]) == PACKAGE / "envs/x/family.py"
    assert short_path_file("family.py", ["envs/x/family.py", "envs/y/family.py"]) is None  # which one: not told
    assert BARE.findall("`checks.py`, app/ranks.py, sf_hydra.app.train, test_*.py (ppo.py)") == ["checks.py", "ppo.py"]
    assert "checks.py" in repository_file_names() and "games.py" in repository_file_names()
    assert "node_store_gone.py" not in repository_file_names()
    assert DOTTED.findall("`sf_hydra.core.door.SamplerDoor`. hydra_plugins.sf_hydra_plugins") == \
        ["sf_hydra.core.door.SamplerDoor"]
    assert resolves("sf_hydra.core.door.SamplerDoor") and resolves("sf_hydra.app.import_sf_run")
    assert resolves("hydra_plugins.sf_hydra_plugins.local_parallel")
    assert not resolves("sf_hydra.learner.PPOLearner") and not resolves("sf_hydra.trajectory")
    assert resolves("sf_hydra.learner.ppo_learner.PPOLearner.training_step")
    assert not resolves("sf_hydra.learner.ppo_learner.PPOLearner.no_such_method")


def test_a_name_after_a_module_or_path_is_found_and_checked():
    """`module:name`, `path.py:name` and `path.py Name` are checked against what the module defines; a gym id after
    a module, a word of the prose after a path, are not names."""
    text = ("sf_hydra.app.hub:push_main, sf_hydra.app.hub:no_main; sf_hydra.envs.multi_agent.toy:MultiAgentToy-v0; "
            "app/train.py:train; `sampler/messages.py` `Trajectories`, sampler/messages.py Game, enjoy.py Hydra, "
            "core/door.py NoSuchDoor, core/door.py Note")
    assert names_after(text) == [("sf_hydra.app.hub", "push_main"), ("sf_hydra.app.hub", "no_main"),
                                 ("app/train.py", "train"), ("sampler/messages.py", "Trajectories"),
                                 ("sampler/messages.py", "Game"), ("core/door.py", "NoSuchDoor")]
    told = [(where, name) for where, name in names_after(text) if not named_resolves(where, name)]
    assert told == [("sf_hydra.app.hub", "no_main"), ("core/door.py", "NoSuchDoor")], told
    assert not named_resolves("core/trajectory.py", "Trajectories")
    assert named_resolves("benchmarks/sf_reference_outputs.py", "RUN")  # a script's argument, outside src/


def test_a_dotted_name_without_the_package_is_found_and_checked():
    """Read from the package or from the module of that stem; a config key, a file, a variable's attribute let be."""
    text = "`checks.check_family`, `config.validation.check_values()`, `games.Game`, `env.id`, `config.yaml`, checks.x"
    assert SHORT_DOTTED.findall(text) == ["checks.check_family", "config.validation.check_values", "games.Game",
                                          "env.id", "config.yaml"]
    assert [short_dotted_resolves(name) for name in SHORT_DOTTED.findall(text)] == [True, True, False, None, None]
    assert short_dotted_resolves("checks.no_such_check") is False  # a renamed function leaves this behind
    assert short_dotted_resolves("policy.initial_state") is None and short_dotted_resolves("x.y") is None
    assert short_dotted_resolves("door.plan_run") is False  # plan.py's, not door.py's
    assert short_dotted_resolves("sampler.check_sampling_options") is True  # the package sampler, or sampler.py
