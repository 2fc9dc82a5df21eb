"""Every `python train.py` line of README.md and of the docs pages that starts a single run lands in a run folder
of its own: two different lines naming one folder would make the second resume (or refuse, or find finished) the
first's run (a user follows several pages in one folder).
The lines are composed (not run) as train.py composes them; a run's folder is `${train_dir}/${experiment}`."""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from pathlib import Path

from tests.conftest import compose_cfg

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def single_run_lines() -> list:
    """(line, its overrides) of every `python train.py` / `sf-train` line in README's and the docs' bash blocks that
    starts one run: not --multirun, --cfg or --help, no --config-dir (a folder of the user's); leading VAR=value kept
    out."""
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
            if not any(a.startswith("-") or a.startswith("hydra.searchpath") for a in args):
                lines.append((line.split("#", 1)[0].strip(), args))
    return lines


def test_readme_lines_are_found():
    lines = [line for line, _ in single_run_lines()]
    assert "python train.py" in lines and len(lines) >= 10, lines
    assert any("logger=wandb" in line for line in lines) and any("pbt.with_pbt=true" in line for line in lines)


def test_each_readme_line_that_starts_a_variant_has_its_own_run_folder():
    folders = defaultdict(set)
    for line, args in single_run_lines():
        named = [a.split("=", 1)[1] for a in args if a.startswith("experiment=")]
        folder = named[-1] if named else compose_cfg(*args).experiment  # composed: the env's or a preset's name
        folders[folder].add(frozenset(args) - {"env=gym/cartpole"})  # the default env
    shared = {folder: sorted(" ".join(sorted(a)) for a in variants) for folder, variants in folders.items()
              if len(variants) > 1}
    assert not shared, f"README / docs lines sharing a run folder (give each its own experiment=): {shared}"
