"""No two modules of the package share a file name, so that a file name (in a traceback, a doc, an editor's tab, a
short path such as `core/game_results.py`) says which module it is.

The one exemption is the env families' slots: each family under src/sf_hydra/envs/<family>/ fills the same slots
(`family.py`, its `schema.py`, `wrappers.py` beside the generic src/sf_hydra/envs/wrappers.py); every folder of
envs/ counts as a family here (multi_agent/ included). A module of an env
family is exempt when its file name is also used by another env family or by src/sf_hydra/envs/ itself; it is then
that slot, and set aside. Every other module's file name (`__init__.py` aside) appears once under src/sf_hydra,
the modules of src/sf_hydra/envs/ itself and the families' modules whose name no other family uses included: an
env family's `games.py` and a `games.py` of core/ clash."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path, PurePosixPath
from typing import Dict, Iterable, List

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "sf_hydra"


def _in_a_family(path: PurePosixPath) -> bool:
    """Whether a module (a path relative to src/sf_hydra) lies in a folder of envs/ (an env family's)."""
    return len(path.parts) >= 3 and path.parts[0] == "envs"


def _envs_names(paths: List[PurePosixPath]) -> Dict[str, int]:
    """{file name: how many places of envs/ use it}, a place being an env family or envs/ itself."""
    places = defaultdict(set)
    for path in paths:
        if path.parts[0] == "envs":
            places[path.name].add(path.parts[1] if _in_a_family(path) else "")
    return {name: len(where) for name, where in places.items()}


def clashes(modules: Iterable[str]) -> Dict[str, List[str]]:
    """{file name: its modules} of the names more than one module uses, the env families' slots set aside (see the
    module's docstring). `modules` are paths relative to src/sf_hydra."""
    paths = [PurePosixPath(m) for m in modules if PurePosixPath(m).name != "__init__.py"]
    used_in_envs = _envs_names(paths)
    by_name = defaultdict(list)
    for path in paths:
        if not (_in_a_family(path) and used_in_envs[path.name] > 1):
            by_name[path.name].append(str(path))
    return {name: sorted(found) for name, found in by_name.items() if len(found) > 1}


def test_no_two_modules_share_a_file_name():
    modules = [str(p.relative_to(PACKAGE).as_posix()) for p in PACKAGE.rglob("*.py")]
    assert len(modules) > 100, modules
    found = clashes(modules)
    assert not found, f"modules that share a file name (rename one to say what it holds): {found}"


def test_the_check_tells_a_clash_from_an_env_familys_slot():
    assert clashes(["core/games.py", "envs/atari/games.py", "app/export.py", "evaluation/export.py"]) == {
        "games.py": ["core/games.py", "envs/atari/games.py"],
        "export.py": ["app/export.py", "evaluation/export.py"]}
    assert clashes(["learner/settings.py", "sampler/settings.py"]) == {
        "settings.py": ["learner/settings.py", "sampler/settings.py"]}
    slots = ["envs/family.py", "envs/gym/family.py", "envs/doom/family.py", "envs/wrappers.py",
             "envs/atari/wrappers.py", "config/schema.py", "envs/atari/schema.py", "envs/doom/schema.py",
             "envs/__init__.py", "envs/doom/__init__.py", "core/__init__.py"]
    assert clashes(slots) == {}
    assert clashes(["envs/family.py", "config/family.py", "envs/gym/family.py"]) == {
        "family.py": ["config/family.py", "envs/family.py"]}
