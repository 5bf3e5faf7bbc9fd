"""`tail` reads through `OutputReader`: repeats dropped, a request printed at its end
(its `[DONE]` or its whole response), `--raw` lines in replay's output format."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.tools.test_output_reader import Record, write
from worker.constants import DONE_KIND, H_KIND, H_PART, H_REQUEST_ID, H_SEQ
from worker.tools.tail import Transcript, tail

pytestmark = pytest.mark.integration


def output(rid: str, seq: int, part: int, value: Any, kind: str = "chunk") -> Record:
    data = b"[DONE]" if kind == DONE_KIND else json.dumps(value).encode()
    headers = [
        (H_REQUEST_ID, rid.encode()),
        (H_SEQ, str(seq).encode()),
        (H_PART, str(part).encode()),
        (H_KIND, kind.encode()),
    ]
    return rid, data, headers


def delta(content: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


WHOLE = {"choices": [{"index": 0, "message": {"content": "all at once"}, "finish_reason": "stop"}]}
LOG = [
    output("s", 0, 0, delta("Hel")),
    output("s", 1, 0, delta("lo")),
    output("s", 1, 0, delta("lo")),  # a redelivery's repeat
    output("w", 0, 0, WHOLE, "response"),
    output("s", 2, 0, delta("!", "stop")),
    output("s", 2, 1, None, DONE_KIND),
    output("open", 0, 0, delta("never ends")),
]


@pytest.fixture
def topic(kafka_bootstrap: str, new_topic: Callable[..., str]) -> str:
    name: str = new_topic(partitions=2)
    asyncio.run(write(kafka_bootstrap, name, LOG))
    return name


def test_each_request_is_printed_at_its_end(kafka_bootstrap: str, topic: str) -> None:
    out = io.StringIO()
    ended: dict[str, Transcript] = {}
    n = asyncio.run(tail(kafka_bootstrap, topic, out, idle_exit_s=1.0, on_done=ended.__setitem__))
    assert n == 2 and set(ended) == {"s", "w"}
    text = out.getvalue()
    assert "=== s ===\n[choice 0, finish stop]\nHello!\n" in text
    assert "=== w ===\n[choice 0, finish stop]\nall at once\n" in text
    assert "never ends" not in text


def test_raw_prints_every_output_once(kafka_bootstrap: str, topic: str) -> None:
    out = io.StringIO()
    n = asyncio.run(tail(kafka_bootstrap, topic, out, raw=True, idle_exit_s=1.0))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert n == 2 and len(lines) == len(LOG) - 1
    s = [line for line in lines if line["key"] == "s"]
    assert [line["value"] for line in s] == [
        delta("Hel"), delta("lo"), delta("!", "stop"), "[DONE]",
    ]  # fmt: skip
    assert s[0]["headers"] == {H_REQUEST_ID: "s", H_SEQ: "0", H_PART: "0", H_KIND: "chunk"}


def test_it_stops_after_as_many_requests_as_asked(kafka_bootstrap: str, topic: str) -> None:
    out = io.StringIO()
    n = asyncio.run(tail(kafka_bootstrap, topic, out, max_requests=1))
    assert n == 1 and out.getvalue().count("=== ") == 1
