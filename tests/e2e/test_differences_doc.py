"""The differences the end-to-end suite accepts (tests/e2e/differences.py) are the ones
docs/reference/parity.md lists in its section on vLLM 0.32.0's coupled server. No engine
needed: this runs in `make test`."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.differences import DIFFERENCES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "parity.md"
SECTION = "## vLLM 0.32.0's coupled server on a real engine"


def documented_ids() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    assert SECTION in text, f"{PAGE} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w-]+)` \|", section, flags=re.M)


def test_the_parity_page_lists_exactly_the_accepted_differences() -> None:
    ids = documented_ids()
    assert len(ids) == len(set(ids)), ids
    assert ids == [d.id for d in DIFFERENCES]
