"""The refusals README.md and the pages of docs/ show are what their commands say today.

The convention (docs/testing.md, "Error examples in the docs"): a refusal quoted in the docs, any line holding
`bad config: ` other than the shape itself (`bad config: key=value ...`), is the first line of a fenced `text`
block, an *error example*, and says which command it belongs to in one of two ways:

- a `bash` block right above it (only blank lines between): the block's last command is the one refused, as
  pasted (`python train.py ...` or `sf-train ...`); the lines above it in that block run first, as a user would
  run them (the run that a resume then refuses is trained, with a short budget);
- where no command line makes the state the refusal needs (a run folder from elsewhere, a planted file): an HTML
  comment right above the block, `<!-- refusal tested by tests/<file>.py -->`, naming the test that makes that
  state and checks that refusal; that file must exist and hold the refused value.

The refused command runs through what train.py runs before any process starts (check_command_line, after
apply_aliases), in an empty folder of its own; the refusal, framed as train.py prints it ("bad config: " and
the one line), must start with the block's text, its lines joined and its spaces collapsed, `...` standing for
any text and the folder's own path left out (the docs write run folders relative to where the user is).
tests/packaging/test_readme_commands.py skips these refused lines (a refusal exits with status 2)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import pytest

from sf_hydra.app.checks import check_command_line
from sf_hydra.config import ConfigError
from sf_hydra.config.aliases import apply_aliases
from tests.faults.runs import env_with_repo

REPO = Path(__file__).resolve().parents[2]
CONF = str(REPO / "conf")
QUOTED = "bad config: "
SHAPE = re.compile(r"bad config: key=value\b")  # the refusals' shape, as the docs describe it: not an example
FENCE = re.compile(r"(?ms)^```(\w*)[^\n]*\n(.*?)^```[ \t]*$")
MARKER = re.compile(r"<!-- refusal tested by (\S+) -->")
SETUP_BUDGET = ("train_for_env_steps=3000", "logger.log_interval_sec=1")  # a set-up line's run: a short one


@dataclass(frozen=True)
class ErrorExample:
    page: str  # relative to the repository
    line: int  # the block's first line, 1-based
    text: str  # the block, as shown
    commands: Tuple[str, ...] = ()  # the bash block above it: set-up lines, then the refused command
    tested_by: str = ""  # the marker's test file

    @property
    def refused(self) -> str:
        return self.commands[-1] if self.commands else ""

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages() -> list:
    """README.md and every page under docs/, relative to the repository."""
    return ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))]


def command_lines(block: str) -> Tuple[str, ...]:
    """A bash block's commands: `\\` lines joined, comments and blank lines dropped (as the docs' command test
    reads them)."""
    lines = (line.split("  #", 1)[0].split(" # ", 1)[0].strip() for line in block.replace("\\\n", " ").splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


def _examples_of(page: str) -> list:
    text = (REPO / page).read_text()
    blocks = list(FENCE.finditer(text))
    found = []
    for i, block in enumerate(blocks):
        if block.group(1) != "text" or not block.group(2).startswith(QUOTED):
            continue
        gap = text[blocks[i - 1].end() if i else 0:block.start()]
        marker = MARKER.fullmatch(gap.strip().splitlines()[-1].strip()) if gap.strip() else None  # the line above
        above = blocks[i - 1] if i and not gap.strip() and blocks[i - 1].group(1) == "bash" else None
        found.append(ErrorExample(page, text.count("\n", 0, block.start()) + 2, block.group(2).rstrip("\n"),
                                  command_lines(above.group(2)) if above else (), marker.group(1) if marker else ""))
    return found


def error_examples() -> list:
    """Every error example of README.md and docs/, page by page, in order."""
    return [example for page in doc_pages() for example in _examples_of(page)]


def refused_commands() -> set:
    """{(page, command)}: the commands the error examples refuse (not to be run for success)."""
    return {(e.page, e.refused) for e in error_examples() if e.refused}


def test_every_quoted_refusal_is_an_error_example():
    firsts = {(e.page, e.line) for e in error_examples()}
    loose = [f"{page}:{n}" for page in doc_pages() for n, line in enumerate((REPO / page).read_text().splitlines(), 1)
             if QUOTED in line and not SHAPE.search(line) and (page, n) not in firsts]
    assert not loose, f"refusals quoted outside an error example (a text block after its command's bash block): {loose}"
    homeless = [str(e) for e in error_examples() if not e.commands and not e.tested_by]
    assert not homeless, f"error examples with no bash block right above them and no `refusal tested by` marker: " \
                         f"{homeless}"


def test_the_convention_finds_the_examples():
    examples = {e.page: e for e in error_examples()}
    assert examples["docs/concepts.md"].refused.startswith("python train.py hardware."), examples
    assert len(error_examples()) >= 5, error_examples()


def argv_of(command: str) -> list:
    """train.py's arguments in a `python train.py ...` or `sf-train ...` line."""
    words = shlex.split(command)
    if words[:2] == ["python", "train.py"]:
        return words[2:]
    assert words[0] == "sf-train", f"an error example's command is train.py's: {command}"
    return words[1:]


def refusal(command: str, folder: Path) -> Optional[str]:
    """What train.py says, run in `folder`, refusing `command` before any process starts ("bad config: ..." on
    one line, `folder`'s own path left out); None if it passes."""
    here = Path.cwd()
    os.chdir(folder)
    try:
        check_command_line(apply_aliases(argv_of(command)), CONF)
    except ConfigError as e:
        return QUOTED + str(e).replace(f"{folder}{os.sep}", "")
    finally:
        os.chdir(here)
    return None


def shown_pattern(shown: str) -> re.Pattern:
    """The block's text as a pattern: lines joined, spaces collapsed, `...` any text."""
    return re.compile(".*?".join(re.escape(part.strip()) for part in " ".join(shown.split()).split("...")))


def check_example(example: ErrorExample, folder: Path) -> None:
    said = refusal(example.refused, folder)
    assert said is not None, f"{example}: `{example.refused}` is not refused any more; the page shows\n{example.text}"
    said = " ".join(said.split())
    first = example.text.splitlines()[0]
    assert shown_pattern(first).match(said), f"{example}: `{example.refused}` says\n{said}\nnot\n{first}"
    assert shown_pattern(example.text).match(said), f"{example}: `{example.refused}` says\n{said}\nnot\n{example.text}"


def _with(kind: str) -> list:
    chosen = [e for e in error_examples() if e.commands and (len(e.commands) > 1) == (kind == "after a run")]
    return chosen or [pytest.param(None, marks=pytest.mark.skip(reason=f"no error example {kind}"))]


@pytest.mark.parametrize("example", _with("alone"), ids=str)
def test_error_example_is_what_its_command_says(example, tmp_path):
    check_example(example, tmp_path)


@pytest.mark.slow  # a set-up line trains (a short CartPole run: ~10 s)
@pytest.mark.parametrize("example", _with("after a run"), ids=str)
def test_error_example_after_a_run_is_what_its_command_says(example, tmp_path):
    for command in example.commands[:-1]:
        argv = [sys.executable, str(REPO / "train.py"), *argv_of(command), *SETUP_BUDGET]
        proc = subprocess.run(argv, cwd=tmp_path, env=env_with_repo(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300)
        assert proc.returncode == 0, f"{example}: set-up `{command}` failed\n{proc.stdout[-3000:]}"
    check_example(example, tmp_path)


@pytest.mark.parametrize("example", [e for e in error_examples() if e.tested_by], ids=str)
def test_marked_error_example_is_tested_where_it_says(example):
    test_file = REPO / example.tested_by
    assert test_file.is_file() and test_file.name.startswith("test_"), f"{example}: no test {example.tested_by}"
    value = re.match(r"bad config: [^=]+=(.+?) is not allowed", example.text)
    assert value, f"{example}: not a refusal's shape: {example.text.splitlines()[0]}"
    assert value.group(1).strip("'\"") in test_file.read_text(), \
        f"{example}: {example.tested_by} does not hold the refused value {value.group(1)}"
