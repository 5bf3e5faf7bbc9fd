"""The Integrate and Reference pages say what the code does: the wire contract's fields,
headers, error codes and bounds, the parser names, and the difference ids the code and
tests cite."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from worker import constants
from worker.core import bounds, errors
from worker.core.parsers import REASONING_FORMATS, TOOL_FORMATS
from worker.wire.control import ControlRecord
from worker.wire.inbound import ChunkRecord

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONTRACT = (DOCS / "integrate" / "contract.md").read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    """A `##` section's text (up to the next `##` heading)."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def first_cells(text: str) -> list[str]:
    """The first cell of every table row, header rows included."""
    return [ln.split("|")[1].strip() for ln in text.splitlines() if ln.startswith("|")]


def test_every_input_field_is_in_the_contract() -> None:
    fields = {f.encode_name for f in msgspec.structs.fields(ChunkRecord)}
    cells = set(first_cells(section(CONTRACT, "Input records")))
    assert {f"`{f}`" for f in fields} <= cells, fields - {c.strip("`") for c in cells}


def test_the_contract_names_no_input_field_the_type_lacks() -> None:
    fields = {f.encode_name for f in msgspec.structs.fields(ChunkRecord)}
    table = section(CONTRACT, "Input records").split("\n### ")[0]
    named = {c.strip("`") for c in first_cells(table)[2:]}
    assert named <= fields, named - fields


def test_every_control_field_is_in_the_contract() -> None:
    fields = {f.encode_name for f in msgspec.structs.fields(ControlRecord)}
    named = {c.strip("`") for c in first_cells(section(CONTRACT, "Control records"))[2:]}
    assert named == fields


def test_every_header_is_in_the_contract() -> None:
    headers = [v for k, v in vars(constants).items() if k.startswith("H_")]
    missing = [h for h in headers if f"`{h}`" not in CONTRACT]
    assert not missing, missing


def test_every_error_code_is_in_the_errors_table() -> None:
    table = section(CONTRACT, "Errors")
    missing = [c for c in errors.CODES if f"| `{c}` |" not in table]
    assert not missing, missing


def _number(cell: str) -> int:
    return int(cell.split()[0].replace(",", ""))


def _row(table: str, first: str) -> list[str]:
    for ln in table.splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r}")


def test_the_bounds_are_the_codes() -> None:
    table = section(CONTRACT, "Bounds")
    expected = {
        "`max_stop_strings`": constants.DEFAULT_MAX_STOP_STRINGS,
        "`max_stop_length`": constants.DEFAULT_MAX_STOP_LENGTH,
        "`max_stop_token_ids`": constants.DEFAULT_MAX_STOP_TOKEN_IDS,
        "`max_tools`": constants.DEFAULT_MAX_TOOLS,
        "`max_tools_bytes`": constants.DEFAULT_MAX_TOOLS_BYTES,
        "`n`": bounds.MAX_N,
        "generate outputs or choices in one `response` record": bounds.MAX_N_SEQUENCES,
        "input record size": constants.DEFAULT_MAX_RECORD_BYTES,
    }
    for first, value in expected.items():
        assert _number(_row(table, first)[1]) == value, first


def test_every_parser_name_is_on_the_parsers_page() -> None:
    page = (DOCS / "reference" / "parsers.md").read_text(encoding="utf-8")
    names = set(REASONING_FORMATS) | set(TOOL_FORMATS)
    missing = sorted(n for n in names if f"`{n}`" not in page)
    assert not missing, missing


def test_cited_difference_ids_exist() -> None:
    """Code and tests cite a difference as `differences.md <id>`: each id is a row."""
    page = (DOCS / "reference" / "differences.md").read_text(encoding="utf-8")
    ids = set(re.findall(r"^\| `([a-z0-9-]+)` \|", page, re.M))
    cited: dict[str, set[str]] = {}
    for folder in ("worker", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for m in re.finditer(r"differences\.md,?\s+([a-z0-9]+(?:-[a-z0-9]+)+)", text):
                cited.setdefault(m.group(1), set()).add(str(path.relative_to(ROOT)))
    assert len(cited) >= 20, "the citations are no longer found: update the pattern"
    unknown = {i: sorted(where) for i, where in cited.items() if i not in ids}
    assert not unknown, unknown
