"""The gateway's Responses and Messages routes in the whole loop (stand-in engine, real
broker, Redis and worker), read by the official SDKs: `openai` for POST /v1/responses,
`anthropic` for POST /v1/messages. Streamed as each API's SSE (`event:` + `data:`, no
`[DONE]`), whole as one JSON body, errors in each API's shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.gateway.conftest import GatewayProcess, Loop
from tests.gateway.stand_in import MODEL

pytestmark = pytest.mark.integration

_clients: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def openai_client(g: GatewayProcess) -> openai.OpenAI:
    c = openai.OpenAI(base_url=g.url + "/v1", api_key="unused", max_retries=0, timeout=60)
    _clients.append(c)
    return c


def anthropic_client(g: GatewayProcess) -> anthropic.Anthropic:
    c = anthropic.Anthropic(base_url=g.url, api_key="unused", max_retries=0, timeout=60)
    _clients.append(c)
    return c


def sse_lines(g: GatewayProcess, path: str, body: dict[str, Any]) -> list[str]:
    with httpx.Client(base_url=g.url, timeout=60) as c:
        r = c.post(path, json=body)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        return r.text.splitlines()


def _framing(lines: list[str]) -> list[str]:
    """The event types of an SSE body, checking each `event:` line names its `data:`."""
    types = []
    for k, line in enumerate(lines):
        if line.startswith("event: "):
            data = lines[k + 1]
            assert data.startswith("data: {"), data
            kind = line[len("event: ") :]
            assert data.startswith(f'data: {{"type":"{kind}"'), (line, data)
            types.append(kind)
    assert not any("[DONE]" in line for line in lines)
    return types


def test_responses_streamed_and_whole(loop: Loop) -> None:
    loop.start_worker()
    g = loop.start_gateway()
    c = openai_client(g)
    text = "responses héllo"
    expected = loop.engine.answer_text(text)
    whole = c.responses.create(model=MODEL, input=text)
    assert whole.output_text == expected and whole.status == "completed"
    assert whole.id.startswith("resp_")
    assert whole.usage is not None
    assert whole.usage.output_tokens == len(loop.engine.answer_ids(text))
    with c.responses.stream(model=MODEL, input=text) as s:
        deltas = "".join(e.delta for e in s if e.type == "response.output_text.delta")
        final = s.get_final_response()
    assert deltas == final.output_text == expected
    assert final.usage == whole.usage
    types = _framing(sse_lines(g, "/v1/responses", {"model": MODEL, "input": text, "stream": True}))
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    # a length cut: the engine's max_tokens from max_output_tokens, an incomplete response
    cut = c.responses.create(model=MODEL, input=text, max_output_tokens=5)
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"
    limits = [r["sampling_params"].get("max_tokens") for r in loop.engine.generated]
    assert 5 in limits


def test_messages_streamed_and_whole(loop: Loop) -> None:
    loop.start_worker()
    g = loop.start_gateway()
    c = anthropic_client(g)
    text = "messages héllo"
    expected = loop.engine.answer_text(text)
    messages: Any = [{"role": "user", "content": text}]
    whole = c.messages.create(model=MODEL, max_tokens=500, messages=messages)
    assert [b.type for b in whole.content] == ["text"]
    assert whole.content[0].text == expected  # type: ignore[union-attr]
    assert whole.stop_reason == "end_turn"
    assert whole.usage.output_tokens == len(loop.engine.answer_ids(text))
    with c.messages.stream(model=MODEL, max_tokens=500, messages=messages) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    assert streamed == expected
    assert final.model_dump(exclude={"id"}) == whole.model_dump(exclude={"id"})
    body = {"model": MODEL, "max_tokens": 500, "messages": messages, "stream": True}
    types = _framing(sse_lines(g, "/v1/messages", body))
    assert types[0] == "message_start" and types[-1] == "message_stop"
    cut = c.messages.create(model=MODEL, max_tokens=4, messages=messages)
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 4


def test_errors_in_each_apis_shape(loop: Loop) -> None:
    loop.start_worker()
    g = loop.start_gateway()
    with pytest.raises(openai.NotFoundError) as e:
        openai_client(g).responses.create(model="nope", input="hi")
    assert e.value.body["code"] == 404  # type: ignore[index]  (the render's answer, as is)
    with pytest.raises(anthropic.NotFoundError) as a:
        anthropic_client(g).messages.create(
            model="nope", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert a.value.body == {  # (vLLM's render answers OpenAI's shape: reshaped)
        "type": "error",
        "error": {"type": "not_found_error", "message": "The model `nope` does not exist."},
    }
    # the engine fails mid-stream: the API's error event ends the stream
    lines = sse_lines(g, "/v1/responses", {"model": MODEL, "input": "error now", "stream": True})
    types = _framing(lines)
    assert types[0] == "response.created" and types[-1] == "error"
    body = {
        "model": MODEL,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "error now"}],
        "stream": True,
    }
    types = _framing(sse_lines(g, "/v1/messages", body))
    assert types[0] == "message_start" and types[-1] == "error"
    with httpx.Client(base_url=g.url, timeout=30) as h:
        r = h.post(
            "/v1/messages", content=b"not json", headers={"content-type": "application/json"}
        )
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
