"""Early stop over a real broker: a worker with `--control-topic` publishes
one control record for each request it finished before its engine, the engine side
(`Publisher(control_topic=…)`) holds back the rest of that request, and under exactly-once
a `read_committed` reader sees exactly one per request."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.integration.harness import WorkerProcess, done_count, publish, read_all
from worker.tools.publisher import Publisher

pytestmark = pytest.mark.integration

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"


def _ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def _stop_requests(tok: Tokenizer, count: int, seed: int) -> list[list[dict[str, Any]]]:
    """`count` requests of one token per record, each with a stop string that fires in
    its middle (so the engine side would go on), every third one failing by a gap instead."""
    rng = random.Random(seed)
    out = []
    words = WORDS.split()
    for n in range(count):
        rid = f"stop-{seed}-{n}"
        ids = _ids(tok, " ".join(words * 3))
        # (No stop word inside an earlier word: "eta" would fire in "beta". A request
        # failed by a gap stops late, so that the gap comes first.)
        stop = rng.choice(["delta", "epsilon", "iota", "kappa"]) if n % 3 != 2 else "omicron"
        records: list[dict[str, Any]] = []
        for i, token in enumerate(ids):
            rec: dict[str, Any] = {
                "request_id": rid,
                "seq": i,
                "generate_chunk": {"choices": [{"index": 0, "token_ids": [token]}]},
            }
            if i == 0:
                rec["chat_request"] = {"stop": [stop]}
            records.append(rec)
        if n % 3 == 2:
            records = [*records[:5], records[6]]  # seq 6 after 4: a gap
        records.append({"request_id": rid, "seq": records[-1]["seq"] + 1, "type": "end"})
        out.append(records)
    return out


def _interleave(requests: list[list[dict[str, Any]]], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    queues = [list(r) for r in requests]
    out = []
    while any(queues):
        q = rng.choice([q for q in queues if q])
        out.append(q.pop(0))
    return out


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_each_request_ended_early_gets_one_control_record(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    new_topic: Callable[..., str],
    worker_factory: Callable[..., WorkerProcess],
    guarantee: str,
) -> None:
    control = new_topic(4, "ctl")
    requests = _stop_requests(deepseek, 12, seed=5)
    worker_factory("--control-topic", control, "--guarantee", guarantee)
    asyncio.run(publish(kafka_bootstrap, topics["input"], _interleave(requests, 6)))
    isolation = "read_committed" if guarantee == "exactly-once" else "read_uncommitted"
    outputs = asyncio.run(
        read_all(kafka_bootstrap, topics["output"], lambda o: done_count(o) >= 12)
    )
    assert done_count(outputs) == 12
    controls = asyncio.run(
        read_all(
            kafka_bootstrap, control, lambda o: len({c.key for c in o}) >= 12, 60,
            isolation_level=isolation,
        )
    )  # fmt: skip
    by_request = Counter(c.key for c in controls)
    assert set(by_request) == {r[0]["request_id"] for r in requests}
    if guarantee == "exactly-once":  # one each, not one at least
        assert set(by_request.values()) == {1}, by_request
    for c in controls:
        body = json.loads(c.value)
        assert c.headers["derender-kind"] == "control" and body["request_id"] == c.key
        n = int(c.key.rsplit("-", 1)[1])
        if n % 3 == 2:
            assert (body["reason"], body["error"], body["seq"]) == ("error", "sequence_gap", 6)
        else:
            assert body["reason"] == "stop" and body["error"] is None
            assert 0 < body["output_tokens"] == body["seq"] + 1  # one token per record


def test_the_publisher_holds_back_a_stopped_request(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    new_topic: Callable[..., str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    control = new_topic(4, "ctl")
    worker_factory("--control-topic", control)
    ids = _ids(deepseek, WORDS)
    stop_at = WORDS.split().index("delta")

    async def engine() -> Publisher:
        async with Publisher(kafka_bootstrap, topics["input"], control_topic=control) as pub:
            rid = "held"
            for i, token in enumerate(ids):
                rec = {"choices": [{"index": 0, "token_ids": [token]}]}
                context = {"chat_request": {"stop": ["delta"]}}
                await pub.chunk(rid, rec, context)
                await pub.flush()
                if i == stop_at + 2:  # well past the stop: wait for the worker to say so
                    for _ in range(300):
                        if pub.stopped(rid):
                            break
                        await asyncio.sleep(0.1)
                    assert pub.stopped(rid), "no control record within 30 s"
            await pub.end(rid)
        return pub

    pub = asyncio.run(engine())
    sent_chunks = stop_at + 3
    assert pub.held_back == len(ids) - sent_chunks
    assert pub.tokens_held_back == len(ids) - sent_chunks
    assert pub.sent == sent_chunks + 1  # and the end
    outputs = asyncio.run(read_all(kafka_bootstrap, topics["output"], lambda o: done_count(o)))
    text = "".join(
        (c.get("delta") or {}).get("reasoning") or (c.get("delta") or {}).get("content") or ""
        for o in outputs
        if o.value != b"[DONE]"
        for c in json.loads(o.value)["choices"]
    )
    assert "gamma" in text and "delta" not in text
    assert not [o for o in outputs if o.headers["derender-kind"] == "error"]  # the gap is fine
