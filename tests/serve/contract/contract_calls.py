"""What the contract tests (test_contract*.py) share: the derender paths, a stream of calls
carrying `stream_state`, an error's message."""

from __future__ import annotations

from typing import Any

from tests.serve.bodies import (
    chunk_body,
    completion_chunk_body,
)
from tests.serve.conftest import Client

CHAT = "/v1/chat/completions/derender"
COMPLETION = "/v1/completions/derender"


def stream(
    client: Client, parts: list[list[int]], path: str = CHAT, **kw: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Streams `parts` one call each, carrying stream_state; (chunks, states)."""
    state = None
    chunks, states = [], []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if path == CHAT:
            body = chunk_body(part, state, finish="stop" if last else None, **kw)
        else:
            body = completion_chunk_body(part, state, finish="stop" if last else None, **kw)
        status, answer = client.post(path, body)
        assert status == 200, answer
        assert set(answer) == {"chunk", "stream_state"}
        chunks.append(answer["chunk"])
        state = answer["stream_state"]
        states.append(state)
    return chunks, states


def message_error(answer: dict[str, Any]) -> str:
    return str(answer["error"]["message"])
