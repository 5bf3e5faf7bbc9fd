"""Responses requests that fail, end early or are refused: the stream's failure is the
API's `response.failed` (read by the official SDK), a whole request's the error body;
the request still ends on the topic; chat and completion are untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.core.apis.cases import registry
from tests.core.apis.test_responses_sdk import EVENTS, client, sse
from tests.core.sdk.sdk_cases import PLAIN
from tests.support.helpers import Run
from worker.core.apis.parts import item_id

RID = "resp_err"
CONTEXT: dict[str, Any] = {"api": "responses", "model": PLAIN, "created": 1767225600}
IDS = [9109, 16]  # " ok."


def chunk(seq: int, ids: list[int], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "token_ids": ids, "finish_reason": finish}
    return {"request_id": RID, "seq": seq, "generate_chunk": {"choices": [choice]}, **extra}


def outputs(*records: dict[str, Any]) -> list[tuple[str, bytes]]:
    run = Run(registry(PLAIN))
    run.feed(*records)
    return [(o.kind, o.value) for o in run.outputs]


def events(outs: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    """The events before the request-end marker, each validated as the SDK's type."""
    assert outs[-1] == ("done", b"[DONE]")
    raw = [json.loads(v) for _, v in outs[:-1]]
    for k, e in enumerate(raw):
        EVENTS[e["type"]].model_validate(e)
        assert e["sequence_number"] == k
    return raw


def read_failed(outs: list[tuple[str, bytes]]) -> Any:
    """What the SDK's stream accumulator says of a failed stream: its last event."""
    with client(sse([v for _, v in outs]), True).responses.stream(model=PLAIN, input="?") as s:
        seen = list(s)
    assert seen[-1].type == "response.failed"
    return seen[-1]


def test_a_stream_that_fails_mid_way_ends_with_response_failed() -> None:
    outs = outputs(
        chunk(0, IDS[:1], **CONTEXT, responses_request={"stream": True}),
        chunk(2, IDS[1:]),  # a gap: seq 1 never came
        {"request_id": RID, "seq": 3, "type": "end"},
    )
    raw = events(outs)
    assert [k for k, _ in outs] == ["chunk"] * (len(outs) - 2) + ["error", "done"]
    failed = raw[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "server_error"
    assert failed["response"]["error"]["message"].startswith("sequence_gap: ")
    event = read_failed(outs)
    assert event.response.error is not None and event.response.id == RID


def test_a_request_refused_at_seq_0_is_opened_then_failed() -> None:
    # The SDK reads nothing before `response.created`: the failure opens the stream first.
    bad = {"stream": True, "tool_choice": {"type": "web_search"}}
    outs = outputs(
        chunk(0, IDS, "stop", **CONTEXT, responses_request=bad),
        {"request_id": RID, "seq": 1, "type": "end"},
    )
    raw = events(outs)
    assert [e["type"] for e in raw] == [
        "response.created",
        "response.in_progress",
        "response.failed",
    ]
    assert "tool_choice" in raw[-1]["response"]["error"]["message"]
    read_failed(outs)


def test_an_unknown_model_fails_as_the_api_does() -> None:
    outs = outputs(
        chunk(0, IDS, "stop", **dict(CONTEXT, model="nope"), responses_request={"stream": True}),
        {"request_id": RID, "seq": 1, "type": "end"},
    )
    raw = events(outs)
    assert raw[-1]["type"] == "response.failed"
    assert raw[-1]["response"]["error"]["message"].startswith("model_not_found: ")


def test_a_whole_request_that_fails_gets_the_error_body() -> None:
    rec = {
        "request_id": RID,
        "seq": 0,
        "type": "response",
        **CONTEXT,
        "responses_request": {},
        "generate_response": {"choices": [{"index": 1, "token_ids": IDS}]},
    }
    ((kind, value),) = outputs(rec)
    assert kind == "error"
    assert "one choice" in json.loads(value)["error"]["message"]


def test_a_second_choice_fails_the_stream() -> None:
    outs = outputs(
        chunk(0, IDS[:1], **CONTEXT, responses_request={}),
        {
            "request_id": RID,
            "seq": 1,
            "generate_chunk": {"choices": [{"index": 1, "token_ids": [16]}]},
        },
        {"request_id": RID, "seq": 2, "type": "end"},
    )
    raw = events(outs)
    assert raw[-1]["type"] == "response.failed"
    assert "one choice" in raw[-1]["response"]["error"]["message"]


@pytest.mark.parametrize("finish", ["length", None])
def test_a_length_cut_or_an_abort_ends_incomplete(finish: str | None) -> None:
    last = {"request_id": RID, "seq": 1, "type": "end" if finish else "abort"}
    outs = outputs(chunk(0, IDS, finish, **CONTEXT, responses_request={}), last)
    raw = events(outs)
    end = raw[-1]
    assert end["type"] == "response.incomplete"
    reason = {"reason": "max_output_tokens"} if finish else None
    assert end["response"]["incomplete_details"] == reason
    (item,) = end["response"]["output"]
    assert item["status"] == "incomplete" and item["content"][0]["text"] == " ok."


def test_a_response_over_max_output_bytes_fails_where_it_crosses() -> None:
    reg = registry(PLAIN)
    limit = reg.max_output_bytes
    reg.max_output_bytes = 600  # (the created event is about 400 bytes)
    try:
        run = Run(reg)
        records = [chunk(0, IDS, **CONTEXT, responses_request={})]
        records += [chunk(k, IDS) for k in range(1, 200)]
        run.feed(*records)
        kinds = [o.kind for o in run.outputs]
        assert kinds[-1] == "error" and kinds.count("error") == 1
        assert b"max_output_bytes = 600" in run.outputs[-1].value
        # " ok." is 4 bytes: record 150 is the one whose text crosses 600 bytes, so the
        # 150 before it streamed (after the 4 opening events), and it is the error.
        assert len([o for o in run.outputs if o.kind == "chunk"]) == 4 + 150
        assert dict(run.outputs[-1].headers)["derender-seq"] == b"150"
    finally:
        reg.max_output_bytes = limit


def test_the_stream_replays_byte_for_byte() -> None:
    records = [
        chunk(0, IDS[:1], **CONTEXT, responses_request={"stream": True}),
        chunk(1, IDS[1:], "stop"),
        {"request_id": RID, "seq": 2, "type": "end"},
    ]
    first, again = outputs(*records), outputs(*records)
    assert first == again
    ids = {e.get("item_id") for e in events(first)} - {None}
    assert ids == {item_id("msg", RID, 0)}
