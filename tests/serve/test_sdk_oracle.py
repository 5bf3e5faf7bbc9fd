"""The official `openai` SDK reading `serve`'s streams over real HTTP (#25).

A gateway built on vLLM's derender endpoints calls `POST /v1/chat/completions/derender`
once per generate chunk, carrying `stream_state`, and writes each answer's `chunk` to its
client as an SSE `data:` line, then `data: [DONE]`. That is done here on real TCP against
`serve`, for the SDK oracle's generated chat cases (tests/core/sdk/sdk_cases.py: every
registered format and a plain model, `n` = 1…3 interleaved, logprobs, stop strings,
`length`), with one `stream_state` per choice index, as vLLM's clients carry it. For
`n > 1` the relay opens every choice first, as vLLM's chat server does (the SDK indexes
choices by position, and adds the logprobs of a choice first seen after the first chunk
twice: docs/integrate/serve.md, "Streaming and `stream_state`"), and drops the role serve
sends with each choice's first delta. The SDK reads the re-framed stream and must
accumulate it to exactly `serve`'s whole answer to the same ids (`check_chat_bytes`: the
same comparison and the same named SDK quirks as the Kafka path's oracle).

Not here: usage (`serve` has no `end` record, so only the engine's usage events give a
usage chunk, as with vLLM) and aborts (no such call in vLLM's protocol).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings

from tests.core.sdk.sdk_cases import Case, chat_cases, registry, run_case
from tests.core.sdk.test_sdk_oracle import _settings, check_chat_bytes
from tests.serve.conftest import Client, LiveServer
from tests.support.examples import examples
from worker.serve.app import build_app


@pytest.fixture(scope="module")
def oracle_server() -> Iterator[LiveServer]:
    live = LiveServer(build_app(registry()))
    yield live
    live.stop()


def serve_case(client: Client, case: Case) -> tuple[list[bytes], bytes]:
    """The case through `serve`: each chunk record as one streamed call (the request's
    context on every call, as a vLLM client sends it), and the whole response."""
    run_case(case)  # builds the records (and checks the Kafka path answers)
    head = case.records[0]
    context = {
        "model": case.model,
        "prompt_tokens": head["prompt_tokens"],
        "prompt_token_ids": head["prompt_token_ids"],
        "chat_request": head["chat_request"],
    }
    states: dict[int, Any] = {}
    values: list[bytes] = []
    roles: dict[int, int] = {}
    for rec in case.records:
        if rec.get("type", "chunk") != "chunk":
            continue
        chunk = dict(rec["generate_chunk"], request_id=rec["request_id"])
        index = chunk["choices"][0]["index"] if chunk.get("choices") else 0
        body = {"stream": True, **context, "generate_chunk": chunk}
        body["stream_state"] = states.get(index)
        status, answer = client.chat(body)
        assert status == 200, answer
        out = answer["chunk"]
        for c in out["choices"]:
            if c["delta"].get("role") is not None:
                roles[c["index"]] = roles.get(c["index"], 0) + 1
                if case.n > 1:
                    del c["delta"]["role"]
        if case.n > 1 and not values:
            opening = {k: out[k] for k in ("id", "object", "created", "model")}
            opening["choices"] = [
                {"index": k, "delta": {"role": "assistant", "content": ""}, "logprobs": None}
                | {"finish_reason": None}
                for k in range(case.n)
            ]
            values.append(json.dumps(opening).encode())
        values.append(json.dumps(out).encode())
        states[index] = answer["stream_state"]
    assert all(roles.get(k) == 1 for k in range(case.n)), roles  # each choice opened once
    values.append(b"[DONE]")  # the gateway's end of the SSE stream
    whole = case.whole_record
    body = dict(
        context,
        chat_request=whole["chat_request"],
        generate_response=dict(whole["generate_response"], request_id=whole["request_id"]),
    )
    status, data, _ = client.request(
        "POST", "/v1/chat/completions/derender", json.dumps(body).encode()
    )
    assert status == 200, data
    return values, data


@settings(_settings, max_examples=examples(60))
@given(case=chat_cases())
def test_the_sdk_accumulates_serve_streams_to_serve_whole_answers(
    oracle_server: LiveServer, case: Case
) -> None:
    case = dataclasses.replace(case, abort_after=None, include_usage=False)
    client = Client(oracle_server.port)
    try:
        check_chat_bytes(case, *serve_case(client, case))
    finally:
        client.close()
