"""The generate stream's events as the gateway reads them: from the body's bytes, however
the engine's chunks cut its lines, the same events httpx's own line reader gives."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.gateway.engine import Engine, EngineUnreachable

EVENTS = [
    {"request_id": "r", "choices": [{"index": 0, "token_ids": [1, 2]}]},
    {"request_id": "r", "choices": [{"index": 0, "token_ids": [3], "logprobs": None}]},
    {"request_id": "r", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}},
    {"request_id": "r", "choices": [{"index": 0, "token_ids": [], "text": "héllo 你好 😀"}]},
]


def sse(events: list[dict[str, Any]], newline: str = "\n", done: bool = True) -> bytes:
    lines = [": a comment", "event: message"]
    for e in events:
        lines += [f"data: {json.dumps(e, ensure_ascii=False)}", ""]
    if done:
        lines += ["data: [DONE]", ""]
    return newline.join(lines).encode() + newline.encode()


def cut(body: bytes, at: list[int]) -> list[bytes]:
    points = sorted({0, len(body), *(a % (len(body) + 1) for a in at)})
    return [body[a:b] for a, b in itertools.pairwise(points) if body[a:b]]


async def read(chunks: list[bytes]) -> tuple[list[dict[str, Any]], bool, str | None]:
    """The events, `done`, and the error raised (None: none)."""

    async def body() -> AsyncIterator[bytes]:
        for c in chunks:
            yield c

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    engine = Engine("http://engine", transport=httpx.MockTransport(handler))
    got: list[dict[str, Any]] = []
    error = None
    try:
        async with engine.generate({"request_id": "r"}, {}) as g:
            try:
                async for event in g.events():
                    got.append(event)
            except EngineUnreachable as exc:
                error = str(exc)
            return got, g.done, error
    finally:
        await engine.aclose()


@settings(max_examples=200, deadline=None)
@given(
    at=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_every_chunking_gives_the_same_events(at: list[int], newline: str) -> None:
    body = sse(EVENTS, newline)
    got, done, error = asyncio.run(read(cut(body, at)))
    assert (got, done, error) == (EVENTS, True, None)


def test_the_last_line_may_lack_its_line_break() -> None:
    body = sse(EVENTS[:1]).rstrip(b"\n")
    assert asyncio.run(read([body])) == (EVENTS[:1], True, None)


def test_nothing_after_done_is_read() -> None:
    body = sse(EVENTS[:2]) + b"data: {not json\n\n"
    assert asyncio.run(read([body])) == (EVENTS[:2], True, None)


@pytest.mark.parametrize("tail", [b"", b'data: {"choices": []}'])
def test_a_stream_without_done_is_a_broken_stream(tail: bytes) -> None:
    body = sse(EVENTS[:2], done=False) + tail
    got, done, error = asyncio.run(read(cut(body, [7, 50])))
    assert got == EVENTS[:2] + ([{"choices": []}] if tail else [])
    assert not done
    assert error == "the generate stream ended without [DONE]"
