"""The documentation cannot drift from the code: the generated reference pages equal
what ``docs/gen_reference.py`` writes from the code now, and every page is in the site's
navigation."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_reference_pages_are_current() -> None:
    stale = [
        relative
        for relative, text in generator().pages().items()
        if (DOCS / relative).read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run `make docs` (python docs/gen_reference.py): stale {stale}"


def test_every_option_of_every_command_is_in_the_cli_reference() -> None:
    page = (DOCS / "reference/cli.md").read_text(encoding="utf-8")
    for command in ("run", "backfill", "topic produce", "init", "checkpoint show"):
        assert f"## `{command}`" in page
    assert "`--full-refresh`" in page and "`--source`" in page


def test_every_page_is_in_the_navigation_and_readme_links_resolve() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = set(re.findall(r"[\w/.-]+\.md", yaml.safe_dump(config["nav"])))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == listed
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+\.md)\)", readme):
        assert (ROOT / target).is_file(), target


# A measured figure: a decimal duration or ratio (1.32 s, 0.83 times) or a rate (10,000 events/s).
FIGURE = re.compile(r"\b\d+\.\d+ ?(?:(?:s|ms)\b|\u00d7)|\d[\d,]* (?:rows|events)/s")
# What prints it: a benchmark script, a timed command, or pytest's durations.
PRINTED_BY = re.compile(r"benchmarks/\w+\.py|`time |make bench|--durations")


def test_every_section_quoting_a_measured_figure_names_what_prints_it() -> None:
    """Figures come from scripts: a README or docs section that quotes one names the
    benchmark (or timed command) that prints it, so a reader can reproduce it."""
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    unsourced = []
    for page in pages:
        if "reference" in page.relative_to(ROOT).parts:  # generated from code
            continue
        for section in re.split(r"^#+ .*$", page.read_text(encoding="utf-8"), flags=re.M):
            figures = FIGURE.findall(section)
            if figures and not PRINTED_BY.search(section):
                unsourced.append(f"{page.relative_to(ROOT)}: {figures[:3]}")
    assert not unsourced, "figures without the command that prints them:\n" + "\n".join(unsourced)


def test_no_page_names_the_shared_tmp_caches_streamsmith_left() -> None:
    """The Kafka range cache and the shipped package's zip live in streamsmith's own
    per-user cache folder, no longer in the shared ``$TMPDIR``: no page may say
    otherwise."""
    stale = [
        f"{page.relative_to(ROOT)}: {old}"
        for page in sorted(DOCS.rglob("*.md"))
        for old in ("TMPDIR/streamsmith-", "/tmp/streamsmith-")
        if old in page.read_text(encoding="utf-8")
    ]
    assert not stale, stale
