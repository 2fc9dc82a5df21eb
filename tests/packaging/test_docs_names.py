"""Every file and module the docs name is there: README.md, the pages of docs/, the docstrings and comments under
src/, the benchmarks, cluster/ and examples/ (their scripts and READMEs) and the tests' READMEs name source files
(`src/sf_hydra/app/checks.py`, `sf_hydra/core/trajectory.py`, `config/schema.py` under the package, `tests/...py`,
`benchmarks/...`, `cluster/...`) and dotted names (`sf_hydra.core.door.SamplerDoor`, `python -m
sf_hydra.app.import_sf_run`); a file moved or renamed leaves a stale name behind, which this finds.

A dotted name resolves when its longest prefix that is a module of src/ (a .py file or a package) defines the next
name at its top level (a def, a class, an assignment or an import; a class's own attribute after it), read from
the source, nothing imported (a module may need an extra). A name shown as where something was, in the form
"`old` is `new`" (docs/layout.md's moves), must no longer resolve, and the name after it must."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PACKAGE = SRC / "sf_hydra"
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
_FILE = r"[\w/.-]*\w\.(?:py|sh|md|yaml|toml|txt|json|npz)"
# a path starts a word: not inside a longer path (~/.config/sf_hydra/...), a placeholder (<family>/) or a URL
PATHS = re.compile(rf"(?<![\w/.<>~-])((?:src/)?sf_hydra/[\w/]*\w\.py|src/[\w/]+/"
                   rf"|(?:{'|'.join(SUBPACKAGES)})/[\w/]*\w\.py|(?:tests|benchmarks|cluster|examples|docs)/{_FILE})"
                   r"(?![\w<>])")
DOTTED = re.compile(r"(?<![\w.])sf_hydra(?:\.[A-Za-z_]\w*)+")
MOVED = re.compile(r"`([^`]+)`\s+is\s+`([^`]+)`")
MODULE_ATTRIBUTES = {"__file__", "__name__", "__path__", "__spec__", "__doc__"}  # every module has them


def texts() -> dict:
    """{file relative to the repository: its text} for README.md, docs/, src/, benchmarks/, cluster/, examples/ and
    the tests' READMEs (not the tests' code: a test names a missing module on purpose)."""
    files = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *SRC.rglob("*.py"), *(REPO / "tests").rglob("*.md")]
    files += [f for folder in ("benchmarks", "cluster", "examples") for f in (REPO / folder).rglob("*")
              if f.suffix in (".py", ".md", ".sh")]
    return {str(f.relative_to(REPO)): f.read_text() for f in sorted(files)}


def path_exists(path: str) -> bool:
    """A path as the docs write it: from the repository's root, or (sf_hydra/..., config/...) from src/."""
    if path.startswith("sf_hydra/"):
        return (SRC / path).exists()
    if path.split("/", 1)[0] in SUBPACKAGES:
        return (PACKAGE / path).exists()
    return (REPO / path).exists()


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


def resolves(name: str) -> bool:
    """Whether a dotted name is a module of src/ or a name one of them defines (module docstring)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        source = module_file(parts[:i])
        if source is None:
            continue
        rest, names = parts[i:], _module_names(source)
        if not rest or "*" in names or (len(rest) == 1 and rest[0] in MODULE_ATTRIBUTES):
            return True
        node = names.get(rest[0])
        if node is None:
            return "__getattr__" in names and rest[0] in _served(names)
        return len(rest) == 1 or not isinstance(node, ast.ClassDef) or rest[1] in _bound(node.body)
    return False


def moved_names(text: str) -> set:
    """The dotted names a text shows as where something was ("`old` is `new`")."""
    return {name for match in MOVED.finditer(text) for name in DOTTED.findall(match.group(1))}


def test_every_path_the_docs_name_exists():
    stale = sorted({f"{file}: {path}" for file, text in texts().items() for path in PATHS.findall(text)
                    if not path_exists(path)})
    assert not stale, "paths named in the docs (and docstrings) that are not in the repository:\n" + "\n".join(stale)


def test_every_dotted_name_the_docs_name_resolves():
    stale = sorted({f"{file}: {name}" for file, text in texts().items()
                    for name in set(DOTTED.findall(text)) - moved_names(text) if not resolves(name)})
    assert not stale, "dotted names in the docs (and docstrings) that name no module or attribute:\n" + "\n".join(stale)


def test_a_moved_name_is_gone_and_its_new_name_resolves():
    pairs = [(old, new) for text in texts().values() for match in MOVED.finditer(text)
             for old, new in [(DOTTED.findall(match.group(1)), DOTTED.findall(match.group(2)))] if old and new]
    assert len(pairs) >= 3, pairs  # docs/layout.md's moves
    wrong = [(old, new) for old, new in pairs if any(map(resolves, old)) or not all(map(resolves, new))]
    assert not wrong, f"`old` is `new`: the old name must be gone and the new one resolve: {wrong}"


def test_the_names_are_found_and_checked():
    """The patterns find the names in the forms the docs write them, and a stale one is told from a good one."""
    found = PATHS.findall("`src/sf_hydra/app/checks.py`, sf_hydra/core/trajectory.py (config/schema.py) "
                          "tests/ddp/test_torchrun_nodes.py; ~/.config/sf_hydra/seal.key, envs/<family>/family.py")
    assert found == ["src/sf_hydra/app/checks.py", "sf_hydra/core/trajectory.py", "config/schema.py",
                     "tests/ddp/test_torchrun_nodes.py"], found
    assert not path_exists("src/sf_hydra/checks.py") and path_exists("src/sf_hydra/app/checks.py")
    assert DOTTED.findall("`sf_hydra.core.door.SamplerDoor`. hydra_plugins.sf_hydra_plugins") == \
        ["sf_hydra.core.door.SamplerDoor"]
    assert resolves("sf_hydra.core.door.SamplerDoor") and resolves("sf_hydra.app.import_sf_run")
    assert not resolves("sf_hydra.learner.PPOLearner") and not resolves("sf_hydra.trajectory")
    assert resolves("sf_hydra.learner.ppo_learner.PPOLearner.training_step")
    assert not resolves("sf_hydra.learner.ppo_learner.PPOLearner.no_such_method")
