"""The documentation site (docs/, mkdocs.yml): the generated config reference is the generator's output and names
every key of the default composed config; every page is in the site's navigation; the site builds with
`mkdocs build --strict` (the `docs` extra); README, the front door, stays at most README_MAX_LINES lines."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sf_hydra.app.config_reference import all_keys, render
from sf_hydra.config.location import find_configs

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference" / "config.md"
README_MAX_LINES = 150
REGENERATE = "python -m sf_hydra.app.config_reference > docs/reference/config.md"


def test_config_reference_is_the_generators_output():
    if importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is None:
        pytest.skip("the page lists every group's options as `.[all]` installs them: hydra/sweeper=optuna needs the "
                    "optuna extra")
    assert REFERENCE.read_text() == render(find_configs()[1]), f"docs/reference/config.md is stale: {REGENERATE}"


def test_config_reference_names_every_key_of_the_default_config():
    page = REFERENCE.read_text()
    keys = all_keys(find_configs()[1])
    assert len(keys) > 150, keys
    # a long mapping (the Trainer's, the callbacks') is a bold row with its leaves below it
    missing = [key for key in keys if f"| `{key}` |" not in page and f"| **`{key}`** |" not in page]
    assert not missing, f"keys of `python train.py --cfg job` the reference leaves out: {missing}"
    for group in ("env", "algo", "model", "hardware", "hydra/launcher"):
        assert f"| `{group}` |" in page, group


def _nav_pages(nav) -> list:
    """Every page file named in mkdocs.yml's nav, in order."""
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def nav_pages() -> list:
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # no tags in ours
    return _nav_pages(config["nav"])


def test_every_page_is_in_the_navigation():
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    listed = nav_pages()
    assert sorted(pages - set(listed)) == [], "pages missing from mkdocs.yml's nav"
    assert sorted(set(listed) - pages) == [], "nav entries without a page"


def test_readme_is_the_front_door():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: keep it <= {README_MAX_LINES}"
    links = set(re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines)))
    assert links, "README links into the docs"
    assert not [link for link in links if not (REPO / link).is_file()], links


CARTPOLE_TIME = "in under a minute"  # `python train.py` to 450: median 8 s on a 2-core CPU (results.md)


def test_the_front_doors_agree_on_how_long_cartpole_takes():
    """README, the site's home page and the Quick start say the same about the first command's run: what was measured
    (docs/results.md, "The default run over seeds")."""
    assert "seconds median 8 (6-12)" in " ".join((DOCS / "results.md").read_text().split())
    for page in (REPO / "README.md", DOCS / "index.md", DOCS / "quickstart.md"):
        text = " ".join(page.read_text().split())
        assert CARTPOLE_TIME in text and "a few minutes" not in text, f"{page.name}: CartPole {CARTPOLE_TIME}"


def test_testing_page_holds_no_test_counts():
    """How many tests pass is generated (`--co -q`, a run's summary), never written down: it drifts."""
    stale = re.findall(r"\d[\d,]* (?:passed|skipped)\b", (DOCS / "testing.md").read_text())
    assert not stale, f"docs/testing.md states test counts that drift: {stale}"


def test_site_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("the docs extra is not installed (mkdocs-material)")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    assert (tmp_path / "site" / "search" / "search_index.json").is_file()
