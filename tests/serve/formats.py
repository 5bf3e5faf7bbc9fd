"""What the tests of `serve`'s Responses and Messages endpoints share: a stream of calls
carrying `stream_state` and ending with the generate stream's `[DONE]`, the SSE a relay
writes of the events, and the official SDKs reading it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai

from tests.serve.bodies import PROMPT_IDS, split
from tests.serve.conftest import Client

RESPONSES = "/v1/responses/derender"
MESSAGES = "/v1/messages/derender"
FIELD = {RESPONSES: "responses_request", MESSAGES: "messages_request"}
RESPONSES_REQUEST: dict[str, Any] = {"model": "deepseek-v4", "input": "Say hello"}
MESSAGES_REQUEST: dict[str, Any] = {
    "model": "deepseek-v4",
    "max_tokens": 200,
    "messages": [{"role": "user", "content": "Say hello"}],
}
TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    },
}
ANTHROPIC_TOOL = {"name": "get_weather", "input_schema": TOOL["parameters"]}


def body(
    path: str,
    request: dict[str, Any],
    *,
    model: str = "deepseek-v4",
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": model,
        "prompt_tokens": len(PROMPT_IDS),
        "prompt_token_ids": PROMPT_IDS,
        FIELD[path]: request,
    }
    out.update(extra)
    return out


def stream(
    client: Client,
    path: str,
    out: list[int],
    sizes: list[int],
    request: dict[str, Any],
    *,
    rid: str = "resp_1",
    model: str = "deepseek-v4",
    finish: str = "stop",
) -> list[dict[str, Any]]:
    """`out` cut by `sizes`, one call each carrying stream_state, then the usage event
    and `[DONE]`, as a relay forwards a generate stream; every answer's events in order."""
    state: Any = None
    events: list[dict[str, Any]] = []
    parts = split(out, sizes)
    chunks: list[Any] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        choice = {"index": 0, "token_ids": part, "finish_reason": finish if last else None}
        chunks.append({"request_id": rid, "choices": [choice]})
    usage = {"prompt_tokens": 99, "completion_tokens": len(out), "total_tokens": 99 + len(out)}
    chunks.append({"request_id": rid, "choices": [], "usage": usage})
    chunks.append("[DONE]")
    for chunk in chunks:
        call = body(path, request, model=model, stream=True, generate_chunk=chunk)
        call["stream_state"] = state
        call["request_id"] = rid
        status, answer = client.post(path, call)
        assert status == 200, answer
        assert set(answer) == {"events", "stream_state"}
        events += answer["events"]
        state = answer["stream_state"]
    return events


def whole(
    client: Client,
    path: str,
    out: list[int],
    request: dict[str, Any],
    *,
    rid: str = "resp_1",
    model: str = "deepseek-v4",
    finish: str = "stop",
) -> dict[str, Any]:
    generate = {"request_id": rid, "choices": [{"index": 0, "token_ids": out}]}
    generate["choices"][0]["finish_reason"] = finish
    status, answer = client.post(path, body(path, request, model=model, generate_response=generate))
    assert status == 200, answer
    return dict(answer)


def sse(events: list[dict[str, Any]]) -> bytes:
    """The events as a relay writes them: `event: <type>` and `data: <json>`, no `[DONE]`."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def openai_sdk(answer: bytes, stream: bool) -> openai.OpenAI:
    """The openai SDK, its HTTP answered with `answer`."""
    media = "text/event-stream" if stream else "application/json"

    def respond(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": media}, content=answer)

    return openai.OpenAI(
        api_key="test",
        base_url="http://derender.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(respond)),
    )
