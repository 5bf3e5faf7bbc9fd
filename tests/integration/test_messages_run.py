"""The Messages API through a real `derender-worker run` on the real broker and Redis.

Messages requests on the built-in DeepSeek V4 entry (its reasoning and tool-call
parsers), streamed and whole, interleaved on the input topic: reasoning and text, two
parallel tool calls, a stop sequence, a `max_tokens` cut and an abort. Every request's
outputs, as the output topic holds them, are byte for byte what `replay`'s loop makes
of the same records (ids and block indices included); every stream's events validate
against the official `anthropic` SDK's types, and its `MessageStream` accumulates
exactly the whole message `run` answered for the same tokens.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.apis.messages_sdk import accumulated, read_whole
from tests.core.parsers.shared.samples import Call, Conversation, render_deepseek_v4
from tests.integration.harness import WorkerProcess, publish, read_all
from tests.support.helpers import Run
from worker.config import load_registry

pytestmark = pytest.mark.integration

MODEL = "deepseek-v4"
PROMPT = "<｜User｜>Weather?<｜Assistant｜><think>"
TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    }
]
CONVERSATIONS = {
    "text": Conversation("The user asks about the weather.", "It is sunny in Paris."),
    "calls": Conversation(
        "Two cities: two calls.",
        "Checking both.",
        (
            Call("get_weather", {"city": "Paris", "days": 3}),
            Call("get_weather", {"city": '東京 "Tokyo"', "days": 1}),
        ),
    ),
    "stop": Conversation("Short.", "First line. STOP and more text that never shows."),
    "length": Conversation("Cut.", "A long answer that the engine cuts"),
    "abort": Conversation("Aborted.", "An answer the engine never finishes"),
}


def requests(tok: Tokenizer) -> dict[str, list[dict[str, Any]]]:
    """Per request id, its records: each conversation streamed in records of 3 tokens
    and, as `<name>-whole`, answered whole from the same tokens."""
    prompt = tok.encode(PROMPT, add_special_tokens=False).ids
    out: dict[str, list[dict[str, Any]]] = {}
    for name, conv in CONVERSATIONS.items():
        ids = tok.encode(render_deepseek_v4(conv), add_special_tokens=False).ids
        finish = "length" if name == "length" else "stop"
        if name == "length":
            ids = ids[: len(ids) - 2]
        req: dict[str, Any] = {"max_tokens": 512, "tools": TOOLS}
        if name == "stop":
            req["stop_sequences"] = [" STOP"]
        context = {"api": "messages", "model": MODEL, "prompt_token_ids": prompt}
        parts = [ids[i : i + 3] for i in range(0, len(ids), 3)]
        if name == "abort":
            parts = parts[:3]
        rid = f"msg_run_{name}"
        records = []
        for seq, part in enumerate(parts):
            last = seq == len(parts) - 1 and name != "abort"
            choice = {"index": 0, "token_ids": part, "finish_reason": finish if last else None}
            rec: dict[str, Any] = {"request_id": rid, "seq": seq, "created": 1767225600}
            rec["generate_chunk"] = {"choices": [choice]}
            if seq == 0:
                rec.update(context, messages_request=dict(req, stream=True))
            records.append(rec)
        closing = "abort" if name == "abort" else "end"
        records.append({"request_id": rid, "seq": len(parts), "type": closing})
        out[rid] = records
        kept = [i for part in parts for i in part]
        whole_finish = "abort" if name == "abort" else finish
        gen = {"choices": [{"index": 0, "token_ids": kept, "finish_reason": whole_finish}]}
        whole = {"request_id": f"{rid}-whole", "seq": 0, "type": "response", "created": 1}
        whole.update(context, messages_request=req, generate_response=gen)
        out[f"{rid}-whole"] = [whole]
    return out


def interleaved(reqs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Round robin over the requests: each request's records stay in order."""
    queues = [list(r) for r in reqs.values()]
    out = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def _without_ids(message: dict[str, Any]) -> dict[str, Any]:
    blocks = [{k: v for k, v in b.items() if k != "id"} for b in message["content"]]
    return {**message, "id": None, "content": blocks}


def test_messages_requests_through_run(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    reqs = requests(deepseek)
    w = worker_factory()
    asyncio.run(publish(kafka_bootstrap, topics["input"], interleaved(reqs)))

    def finished(outputs: list[Any]) -> bool:
        ends = {o.key for o in outputs if o.headers.get("derender-kind") in ("done", "response")}
        return len(ends) == len(reqs)

    got = asyncio.run(read_all(kafka_bootstrap, topics["output"], finished))
    assert finished(got), f"{len(got)} outputs; ended: {sorted({o.key for o in got})}"
    by_request: dict[str, list[bytes]] = {rid: [] for rid in reqs}
    for o in sorted(got, key=lambda o: (o.key, o.offset)):
        assert o.headers["derender-kind"] != "error", o.value
        by_request[o.key].append(o.value)
    # `replay`'s loop on the same records: the same bytes.
    registry = load_registry()
    for rid, records in reqs.items():
        run = Run(registry)
        run.feed(*records)
        assert by_request[rid] == [o.value for o in run.outputs], rid
    # The SDK: every stream accumulates to the whole message of the same tokens.
    for name in CONVERSATIONS:
        rid = f"msg_run_{name}"
        values = by_request[rid]
        assert values[-1] == b"[DONE]"
        message = accumulated(values[:-1], MODEL)
        (body,) = by_request[f"{rid}-whole"]
        want = read_whole(body, MODEL)
        # (The whole request has its own id, so its own message and tool call ids.)
        assert _without_ids(message.model_dump()) == _without_ids(want.model_dump()), name
        kinds = [b.type for b in message.content]
        if name == "calls":
            assert kinds == ["thinking", "text", "tool_use", "tool_use"]
            assert [b.input for b in message.content[2:]] == [
                {"city": "Paris", "days": 3},
                {"city": '東京 "Tokyo"', "days": 1},
            ]
            assert all(b.id.startswith("toolu_") for b in message.content[2:])
        expected = {
            "text": "end_turn",
            "calls": "tool_use",
            "stop": "stop_sequence",
            "length": "max_tokens",
            "abort": None,
        }
        assert message.stop_reason == expected[name], name
        if name == "stop":
            assert message.stop_sequence == " STOP"
            assert message.content[-1].text == "First line."
    assert w.stop() == 0, w.log_tail()
    assert json.loads(by_request["msg_run_text"][0])["type"] == "message_start"
