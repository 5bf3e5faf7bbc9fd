"""docs/reference/differences.md's "Differences from vLLM 0.33" table lists exactly the
documented differences.

Not a parity test: it runs in `make test`, without vLLM or httpx. The expected format is
a section headed "Differences from vLLM 0.33" (any heading level) holding a markdown
table whose first column is each difference's id in backticks:

    ## Differences from vLLM 0.33

    | id | what differs |
    |---|---|
    | `stream-stop` | … |
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.peer.differences.differences import DIFFERENCES

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "differences.md"
TITLE = "Differences from vLLM 0.33"


def _section(text: str) -> str | None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+)\s+(.*?)\s*$", line)
        if m and m.group(2).startswith(TITLE):
            level = len(m.group(1))
            body = []
            for nxt in lines[i + 1 :]:
                h = re.match(r"^(#+)\s", nxt)
                if h and len(h.group(1)) <= level:
                    break
                body.append(nxt)
            return "\n".join(body)
    return None


def table_ids(section: str) -> list[str]:
    """The first-column ids of the section's table rows (header and rule skipped)."""
    ids = []
    rows = [ln.strip() for ln in section.splitlines() if ln.strip().startswith("|")]
    for row in rows[2:]:
        first = row.strip("|").split("|")[0].strip()
        m = re.fullmatch(r"`([^`]+)`", first)
        assert m, f"differences.md {TITLE!r} table: first cell {first!r} is not an id in backticks"
        ids.append(m.group(1))
    return ids


def test_the_page_lists_exactly_the_documented_differences() -> None:
    section = _section(PAGE.read_text(encoding="utf-8"))
    expected = [d.id for d in DIFFERENCES]
    rows = "\n".join(f"| `{d.id}` | {d.title} |" for d in DIFFERENCES)
    assert section is not None, (
        f"{PAGE} has no section {TITLE!r}; expected a table like:\n"
        f"| id | difference |\n|---|---|\n{rows}"
    )
    ids = table_ids(section)
    assert len(ids) == len(set(ids)), f"duplicate ids in the table: {ids}"
    assert set(ids) == set(expected), (
        f"differences.md table ids {sorted(ids)} != tests/peer/differences/differences.py ids "
        f"{sorted(expected)}"
    )


def test_difference_ids_are_stable_names() -> None:
    ids = [d.id for d in DIFFERENCES]
    assert len(ids) == len(set(ids))
    for d in DIFFERENCES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", d.id), d.id
        assert d.title and "\n" not in d.title, d.id
