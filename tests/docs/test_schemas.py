"""schemas/ is generated from the wire types: the files, the types and the examples agree."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from worker.wire import outbound
from worker.wire.inbound import decode_record
from worker.wire.schema import SCHEMAS, render

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "schemas"
EXAMPLES = SCHEMA_DIR / "examples"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_file_matches_the_type(name: str) -> None:
    path = SCHEMA_DIR / name
    assert path.exists(), f"{path} missing: run `make schemas`"
    assert path.read_text(encoding="utf-8") == render(SCHEMAS[name]), (
        f"{name} is stale: run `make schemas`"
    )


def test_no_stray_schema_files() -> None:
    assert {p.name for p in SCHEMA_DIR.glob("*.json")} == set(SCHEMAS)


def test_input_examples_decode() -> None:
    lines = (EXAMPLES / "records.jsonl").read_bytes().splitlines()
    assert len(lines) >= 8
    kinds = set()
    for line in lines:
        rec = decode_record(line, key=None)
        kinds.add(rec.type)
    assert kinds == {"chunk", "response", "end", "abort"}


OUTPUT_TYPES = {
    "chat.completion.chunk": outbound.ChatCompletionChunk,
    "text_completion": outbound.CompletionChunk,
    "chat.completion": outbound.ChatCompletion,
}


def test_output_examples_decode_as_their_types() -> None:
    lines = (EXAMPLES / "outputs.jsonl").read_text(encoding="utf-8").splitlines()
    seen = set()
    for line in lines:
        rec = json.loads(line)
        kind = rec["headers"]["derender-kind"]
        seen.add(kind)
        value = json.dumps(rec["value"]).encode()
        if kind == "done":
            assert rec["value"] == "[DONE]"
        elif kind == "error":
            msgspec.json.decode(value, type=outbound.ErrorResponse)
        else:
            msgspec.json.decode(value, type=OUTPUT_TYPES[rec["value"]["object"]])
    assert {"chunk", "response", "error", "done"} <= seen
