"""Comments, docstrings and pages cite what a reader of the repository can open: vLLM's
source and tests, our docs pages, our tests. The team's notes outside the repository (the
parser and derender references, recorded exchanges, design notes) are cited by none of
them, and every docs page (and section) the code names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("worker", "tests", "bench", "docs", "deploy")
TOP_FILES = ("README.md", "CONTRIBUTING.md", "Makefile")
SKIPPED_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules"}

# The notes by name, their folders, and the notes' own section style ("reference §2.3").
NOTES = re.compile(
    r"vllm-parsers(?:-0\.33)?\.md|vllm-derender-(?:contract|behaviors)\.md"
    r"|\bEXCHANGES\.md|\bDESIGN\.md|\bCONTRACT\.md"
    r"|keda-hpa\.md|model-codebases\.md|otel-messaging\.md|serving-anchors\.md"
    r"|shell-review\.md|stream-processing-anchors\.md"
    r"|shared/(?:reference|peer|engine)/|/work/shared\b|reference/vllm-|\breference §"
)

# `docs/<page>.md`, optionally followed by `, "Section title"` (titles may wrap lines).
DOCS_CITATION = re.compile(r'(docs/[\w./-]+\.md)(?:,\s+"([^"]+)")?')


def scanned_files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and not SKIPPED_DIRS.intersection(path.parts):
                files.append(path)
    return [p for p in files if p != Path(__file__).resolve()]


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None  # a binary file cites nothing


def test_the_pattern_finds_each_kind_of_note_citation() -> None:
    cites = [
        "(reference/vllm-parsers.md §3)",
        "(vllm-parsers-0.33.md row 24)",
        "reference/vllm-derender-contract.md §c.2",
        "Numbers refer to vllm-derender-behaviors.md",
        "(EXCHANGES.md)",
        "/work/shared/reference/keda-hpa.md",
        "(reference §2.15)",
    ]
    assert [c for c in cites if not NOTES.search(c)] == []
    fine = [
        "(vLLM 0.33.0 vllm/parser/gemma4.py)",
        "docs/integrate/contract.md",
        "tests/core/parsers/shared/harness.py",
        "docs/reference/parsers.md",
    ]
    assert [c for c in fine if NOTES.search(c)] == []


def test_no_file_cites_a_note_outside_the_repository() -> None:
    files = scanned_files()
    assert len(files) > 300, "the scan found too few files: check SCANNED"
    found = []
    for path in files:
        text = text_of(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = NOTES.search(line)
            if m:
                found.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)}")
    assert found == [], "cite vLLM's source, our docs or our tests instead:\n" + "\n".join(found)


def headings(page: Path) -> set[str]:
    lines = page.read_text(encoding="utf-8").splitlines()
    return {re.sub(r"^#+\s*", "", ln).strip() for ln in lines if ln.startswith("#")}


def test_docs_pages_cited_by_the_code_exist() -> None:
    cited: dict[tuple[str, str | None], set[str]] = {}
    for path in (ROOT / "worker").rglob("*.py"):
        for m in DOCS_CITATION.finditer(path.read_text(encoding="utf-8")):
            title = m.group(2) and re.sub(r"\s*\n\s*(?:#\s*)?", " ", m.group(2)).strip()
            cited.setdefault((m.group(1), title), set()).add(str(path.relative_to(ROOT)))
    assert len(cited) >= 10, "the citations are no longer found: update DOCS_CITATION"
    missing = {
        f"{page} {title!r}" if title else page: sorted(where)
        for (page, title), where in cited.items()
        if not (ROOT / page).is_file() or (title and title not in headings(ROOT / page))
    }
    assert missing == {}, missing
