"""Responses requests through `derender-worker run` on the real broker and Redis: the
outputs are, byte for byte, what `replay` gives for the same records (each request's
state went through Redis between its records), every event is the official SDK's type,
and the SDK reads each stream to its end."""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from tests.core.apis.test_responses_sdk import EVENTS, client, sse
from tests.integration.harness import Output, WorkerProcess, interleave, publish, read_all
from worker.config import load_registry
from worker.tools.replay import replay

pytestmark = pytest.mark.integration

# DeepSeek V4: "Weather: call the tool.</think>", then a DSML call of get_weather(city=…)
# (docs/integrate/responses.md's example).
IDS = [58565, 28, 1926, 270, 4105, 16, 128822, 271, 30, 128825, 72461, 4941, 12548, 1018,
       30, 128825, 40148, 5406, 2329, 1281, 1133, 65, 50219, 3816, 30, 128825, 41523, 2329,
       1281, 37399, 4, 3418, 1281, 11476, 3320, 51119, 1718, 128825, 41523, 1018, 1718,
       128825, 40148, 5406, 1018, 1718, 128825, 72461, 4941, 12548, 32]  # fmt: skip
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def request(n: int, rng: random.Random) -> list[dict[str, Any]]:
    """Request `n`: streamed in random cuts, ended, a length cut or aborted; or whole."""
    rid = f"resp_run_{n}"
    context = {
        "api": "responses",
        "model": "deepseek-v4",
        "created": 1767225600,
        "prompt_token_ids": [128804, 128821],
        "responses_request": {"tools": TOOLS, "stream": n % 4 != 3},
    }
    if n % 4 == 3:
        choice = {"index": 0, "token_ids": IDS, "finish_reason": "tool_calls"}
        return [{"request_id": rid, "seq": 0, "type": "response", **context,
                 "generate_response": {"choices": [choice]}}]  # fmt: skip
    ids = IDS[: rng.randint(3, len(IDS))] if n % 4 == 1 else IDS
    records: list[dict[str, Any]] = []
    at = 0
    while at < len(ids):
        size = rng.randint(1, 6)
        part, at = ids[at : at + size], at + size
        finish = ("length" if n % 4 == 1 else "tool_calls") if at >= len(ids) else None
        rec = {
            "request_id": rid,
            "seq": len(records),
            "generate_chunk": {
                "choices": [{"index": 0, "token_ids": part, "finish_reason": finish}]
            },
        }
        if not records:
            rec.update(context)
        records.append(rec)
    if n % 4 == 2:  # aborted before its last record
        records = records[: max(1, len(records) - 2)]
    last = "abort" if n % 4 == 2 else "end"
    records.append({"request_id": rid, "seq": len(records), "type": last})
    return records


def by_request(outputs: list[tuple[str, dict[str, str], bytes]]) -> dict[str, list[bytes]]:
    """Each request's outputs, repeats dropped, in (seq, part) order."""
    seen: dict[tuple[str, int, int], bytes] = {}
    for key, headers, value in outputs:
        ident = (key, int(headers["derender-seq"]), int(headers["derender-part"]))
        assert seen.setdefault(ident, value) == value  # a repeat is identical
    grouped: dict[str, list[bytes]] = {}
    for (key, _, _), value in sorted(seen.items()):
        grouped.setdefault(key, []).append(value)
    return grouped


def test_run_answers_responses_as_replay_does(
    kafka_bootstrap: str, topics: dict[str, str], worker_factory: Callable[..., WorkerProcess]
) -> None:
    rng = random.Random(40)
    gens = [request(n, rng) for n in range(12)]
    records = interleave([_Gen(g) for g in gens], seed=41)  # type: ignore[arg-type]
    worker_factory()
    asyncio.run(publish(kafka_bootstrap, topics["input"], records))

    def finished(outs: list[Output]) -> bool:
        ends = {o.key for o in outs if o.headers["derender-kind"] in ("done", "response")}
        return len(ends) >= len(gens)

    got = asyncio.run(read_all(kafka_bootstrap, topics["output"], finished))
    live = by_request([(o.key, o.headers, o.value) for o in got])

    out = io.BytesIO()
    src = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    replay(io.BytesIO(src), out, load_registry())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    replayed = by_request([(x["key"], x["headers"], _value(x["value"])) for x in lines])
    # The state went through Redis between records: the same outputs as replay's.
    assert {k: [_parsed(v) for v in vs] for k, vs in live.items()} == {
        k: [_parsed(v) for v in vs] for k, vs in replayed.items()
    }
    assert len(live) == len(gens)

    for rid, values in live.items():
        if len(values) == 1:  # the whole one
            (value,) = values
            assert json.loads(value)["object"] == "response"
            client(value, False).responses.create(model="deepseek-v4", input="?")
            continue
        assert values[-1] == b"[DONE]"
        for k, v in enumerate(values[:-1]):
            event = json.loads(v)
            EVENTS[event["type"]].model_validate(event)
            assert event["sequence_number"] == k
        with client(sse(values), True).responses.stream(model="deepseek-v4", input="?") as s:
            last = list(s)[-1]
        assert last.type in ("response.completed", "response.incomplete"), rid


class _Gen:
    """A request's records, as `interleave` takes them."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records


def _value(value: Any) -> bytes:
    return b"[DONE]" if value == "[DONE]" else json.dumps(value).encode()


def _parsed(value: bytes) -> Any:
    return value if value == b"[DONE]" else json.loads(value)
