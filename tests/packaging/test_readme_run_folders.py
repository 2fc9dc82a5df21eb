"""Every `python train.py` line of README.md and of the docs pages that starts a single run lands in a run folder
of its own: two different lines naming one folder would make the second resume (or refuse, or find finished) the
first's run (a user follows several pages in one folder).
The lines are composed (not run) as train.py composes them; a run's folder is `${train_dir}/${experiment}`."""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import compose_cfg
from tests.packaging.test_docs_examples import refused_commands
from tests.packaging.test_readme_commands import NEEDS

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def single_run_lines() -> list:
    """(line, its overrides) of every `python train.py` / `sf-train` line in README's and the docs' bash blocks that
    starts one run: not --multirun, --cfg or --help, no --config-dir (a folder of the user's), not an error
    example's refused command (tests/packaging/test_docs_examples.py: it starts nothing); leading VAR=value kept
    out."""
    refused = {command for _, command in refused_commands()}
    lines = []
    blocks = [b for doc in DOCS for b in re.findall(r"```bash\n(.*?)```", doc.read_text(), re.S)]
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            args = shlex.split(line, comments=True)
            while args and re.fullmatch(r"[A-Z_]+=\S*", args[0]):
                args = args[1:]
            if args[:2] == ["python", "train.py"]:
                args = args[2:]
            elif args[:1] == ["sf-train"]:
                args = args[1:]
            else:
                continue
            if line.split("#", 1)[0].strip() in refused:
                continue
            if not any(a.startswith("-") or a.startswith("hydra.searchpath") for a in args):
                lines.append((line.split("#", 1)[0].strip(), args))
    return lines


def test_readme_lines_are_found():
    lines = [line for line, _ in single_run_lines()]
    assert "python train.py" in lines and len(lines) >= 10, lines
    assert any("logger=wandb" in line for line in lines) and any("pbt.with_pbt=true" in line for line in lines)


def missing_extra(line: str):
    """The extra a line needs that is not installed here (test_readme_commands.NEEDS), or None: its env configs (an
    Atari game's, found through ale_py) may not compose without it."""
    for text, (module, extra) in NEEDS.items():
        if text in line and importlib.util.find_spec(module.split(".")[0]) is None:
            return extra
    return None


def test_each_readme_line_that_starts_a_variant_has_its_own_run_folder():
    folders, left_out = defaultdict(set), {}
    for line, args in single_run_lines():
        named = [a.split("=", 1)[1] for a in args if a.startswith("experiment=")]
        if not named and missing_extra(line):  # its folder is the env's name, which needs the env's configs
            left_out[line] = missing_extra(line)
            continue
        folder = named[-1] if named else compose_cfg(*args).experiment  # composed: the env's or a preset's name
        folders[folder].add(frozenset(args) - {"env=gym/cartpole"})  # the default env
    shared = {folder: sorted(" ".join(sorted(a)) for a in variants) for folder, variants in folders.items()
              if len(variants) > 1}
    assert not shared, f"README / docs lines sharing a run folder (give each its own experiment=): {shared}"
    if left_out:
        pytest.skip(f"the other lines checked; {len(left_out)} need an extra not installed here: "
                    + "; ".join(f"{line} (the {extra} extra)" for line, extra in left_out.items()))
