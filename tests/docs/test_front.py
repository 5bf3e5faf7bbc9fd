"""The README is the front door: short, one click from every docs page, and neither it
nor any page tells the project's history (that is CHANGELOG.md's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))
MAX_README_LINES = 200

# Words of a lab notebook, not of a user's documentation.
HISTORY = re.compile(
    r"\bsession \d+|\bissue #?\d+|(?<![\w&])#\d+\b|\bmet\b.*\bmissed\b|\bcommit range"
    r"|\b[0-9a-f]{7,40}\.\.[0-9a-f]{7,40}\b",
    re.I,
)


def links(path: Path) -> set[Path]:
    """The local files a page's markdown links point at (anchors dropped)."""
    text = path.read_text(encoding="utf-8")
    found = set()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        found.add((path.parent / target.split("#")[0]).resolve())
    return found


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines"


def test_the_readme_links_every_docs_page() -> None:
    linked = links(README)
    missing = [str(p.relative_to(ROOT)) for p in PAGES if p.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(path: Path) -> None:
    broken = [str(t.relative_to(ROOT)) for t in links(path) if not t.exists()]
    assert not broken, broken


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_project_history(path: Path) -> None:
    hits = [
        f"{n}: {line.strip()[:120]}"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not hits, "history belongs in CHANGELOG.md:\n" + "\n".join(hits)


def test_the_history_pattern_finds_history() -> None:
    for line in ("Session 13's run", "fixed in issue #29", "(#11)", "targets met / missed"):
        assert HISTORY.search(line), line
    for line in ("`--state-ttl-s`", "the `#` comment", "&#8212;", "n = 128"):
        assert not HISTORY.search(line), line
