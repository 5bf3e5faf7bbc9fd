"""Properties of `serve` over HTTP: a stream carrying stream_state from call to call, cut
anywhere, says what the non-streaming endpoint says for the same ids; and the state does
not grow with the output."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.serve.bodies import (
    CHAT_REQUEST,
    PLAIN,
    REASONED,
    THINK_END,
    TOOL_CALL,
    TOOLS,
    assemble,
    chat_body,
    chunk_body,
    completion_chunk_body,
    generate_response,
    ids,
    split,
)
from tests.serve.conftest import Client, LiveServer
from tests.support.examples import examples

CASES: list[tuple[str, list[int], dict[str, Any]]] = [
    ("deepseek-v4", REASONED, dict(CHAT_REQUEST)),
    ("deepseek-v4", TOOL_CALL, dict(CHAT_REQUEST, tools=TOOLS)),
    ("plain", PLAIN, {"messages": []}),
    ("plain", PLAIN, {"messages": [], "stop": ["Kenobi", "😀 G"]}),
    ("plain", PLAIN, {"messages": [], "stop": ["のテ"], "include_stop_str_in_output": True}),
]

chunkings = st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=40)
SETTINGS = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _whole_chat(c: Client, model: str, out: list[int], cr: dict[str, Any], rid: str) -> Any:
    body = chat_body(out, model=model, chat_request=cr)
    body["generate_response"]["request_id"] = rid
    status, answer = c.chat(body)
    assert status == 200, answer
    return answer["choices"][0]


@SETTINGS
@given(case=st.sampled_from(range(len(CASES))), sizes=chunkings)
def test_streamed_chat_equals_whole(server: LiveServer, case: int, sizes: list[int]) -> None:
    model, out, cr = CASES[case]
    c = Client(server.port)
    try:
        whole = _whole_chat(c, model, out, cr, "prop")
        parts = split(out, sizes)
        state, chunks = None, []
        for i, part in enumerate(parts):
            finish = "stop" if i == len(parts) - 1 else None
            body = chunk_body(part, state, rid="prop", model=model, finish=finish, chat_request=cr)
            status, answer = c.chat(body)
            assert status == 200, answer
            chunks.append(answer["chunk"])
            state = answer["stream_state"]
    finally:
        c.close()
    got = assemble(chunks)
    msg = whole["message"]
    assert got["content"] == (msg.get("content") or None)
    assert got["reasoning"] == (msg.get("reasoning") or None)
    calls = [
        {"id": t["id"], "name": t["function"]["name"], "arguments": t["function"]["arguments"]}
        for t in msg.get("tool_calls") or []
    ]
    assert [dict(t) for t in got["tool_calls"]] == calls
    assert got["finish_reason"] == whole["finish_reason"]
    stop_reasons = [ch["stop_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]]
    assert stop_reasons[:1] == [whole["stop_reason"]]


@SETTINGS
@given(sizes=chunkings, stop=st.sampled_from([None, ["Kenobi"], ["の"]]))
def test_streamed_completion_equals_whole(
    server: LiveServer, sizes: list[int], stop: list[str] | None
) -> None:
    req = {"prompt": "x"} if stop is None else {"prompt": "x", "stop": stop}
    c = Client(server.port)
    try:
        status, whole = c.completion(
            {
                "model": "plain",
                "generate_responses": [generate_response(PLAIN, rid="cprop")],
                "completion_request": req,
            }
        )
        assert status == 200, whole
        parts = split(PLAIN, sizes)
        state, text, finish = None, "", None
        for i, part in enumerate(parts):
            body = completion_chunk_body(
                part,
                state,
                rid="cprop",
                finish="stop" if i == len(parts) - 1 else None,
                completion_request=req,
            )
            status, answer = c.completion(body)
            assert status == 200, answer
            (choice,) = answer["chunk"]["choices"]
            text += choice["text"]
            finish = choice["finish_reason"] or finish
            state = answer["stream_state"]
    finally:
        c.close()
    assert text == whole["choices"][0]["text"]
    assert finish == whole["choices"][0]["finish_reason"]


def test_stream_state_size_is_flat_in_output_length(server: LiveServer) -> None:
    """Parsers on, one token per call: the state at token 2,000 is the size of the state at
    token 50 (a few bytes for larger counters), unlike vLLM's, which carries every id."""
    thinking = ids("Let me think about the weather in Hangzhou. " * 60)[:800]
    answer = ids("It will be sunny and warm, with a light breeze from the east. " * 200)
    out = [*thinking, THINK_END, *answer][:2000]
    assert len(out) == 2000
    c = Client(server.port)
    sizes: dict[int, int] = {}
    try:
        state = None
        for i, t in enumerate(out, 1):
            status, reply = c.chat(chunk_body([t], state, rid="flat"))
            assert status == 200, reply
            state = reply["stream_state"]
            if i in (50, 600, 801, 2000):
                sizes[i] = len(json.dumps(state))
    finally:
        c.close()
    assert sizes[2000] - sizes[50] <= 16, sizes
    assert max(sizes.values()) < 400, sizes
