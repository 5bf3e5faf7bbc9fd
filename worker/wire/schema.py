"""JSON Schema of every wire type, generated from the msgspec Structs.

`python -m worker.wire.schema schemas` (or `make schemas`) rewrites `schemas/*.json`;
a test fails when the committed files and the types disagree.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from worker.wire import control, inbound, messages, outbound, responses

# file name → the type it describes
SCHEMAS: dict[str, Any] = {
    "chunk_record.json": inbound.ChunkRecord,
    "chat_completion_chunk.json": outbound.ChatCompletionChunk,
    "text_completion_chunk.json": outbound.CompletionChunk,
    "chat_completion.json": outbound.ChatCompletion,
    "text_completion.json": outbound.Completion,
    "error.json": outbound.ErrorResponse,
    "control_record.json": control.ControlRecord,
    # api "responses": each streamed event, and the whole response object.
    "responses_event.json": responses.Event,
    "response.json": responses.Response,
    # api "messages": each streamed event (the error event too), and the whole message.
    "messages_event.json": messages.Event,
    "message.json": messages.Message,
}


def render(tp: Any) -> str:
    schema = _clean(msgspec.json.schema(tp))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _clean(node: Any) -> Any:
    """Descriptions (docstrings) with their indentation removed: msgspec 0.23 does that
    itself and 0.22 did not, so the files come out the same with either."""
    if isinstance(node, dict):
        return {
            k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else _clean(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def write_all(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, tp in SCHEMAS.items():
        path = folder / name
        path.write_text(render(tp), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(f"wrote {p}")
