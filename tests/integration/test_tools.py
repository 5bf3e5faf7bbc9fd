"""The user-facing tools against the real broker and Redis: demo, publish → run → tail,
and reprocessing a topic from Kafka (its output equals the live run's, byte for byte)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tests.integration.harness import (
    ROOT,
    WorkerProcess,
    done_count,
    interleave,
    make_generations,
    read_all,
    verify,
)
from worker.adapters.local.kafka_server import DEFAULT_VERSION, starts_from_cache
from worker.tools.publisher import sse_records

pytestmark = pytest.mark.integration


def cli(
    *args: str, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "worker", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def test_demo_runs_end_to_end() -> None:
    proc = cli("demo", "--short", "--fast", timeout=180)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out + proc.stderr.decode()
    # Apache Kafka where it starts at once from the cache (as in CI, where the session
    # resolves it before the first test), tansu elsewhere.
    broker = f"kafka {DEFAULT_VERSION}" if starts_from_cache() else "tansu"
    assert f"broker  {broker} " in out and "redis   redis-server" in out
    assert "=== weather (chatcmpl-demo-0-weather) ===" in out
    assert "=== math (chatcmpl-demo-1-math) ===" in out
    assert "391" in out  # the math answer made it through
    # The stop string ended "count" at seven: one control record (the publisher held back
    # what it had not sent yet; with --fast it had sent nearly everything already).
    assert "=== count (chatcmpl-demo-6-count) ===" in out
    assert "seven" in out and "eight" not in out.split("=== count")[1]
    assert "early stop: 1 request(s) answered before their engine finished" in out
    assert "(error)" not in out
    summary = next(line for line in out.splitlines() if line.startswith("summary:"))
    assert "records" in summary and "p50" in summary and "p99" in summary
    assert out.rstrip().endswith("stopped the worker, the broker and redis.")


def test_the_full_demo_shows_a_responses_and_a_messages_stream() -> None:
    proc = cli("demo", "--fast", timeout=180)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out + proc.stderr.decode()
    assert "(error)" not in out
    sections = {s.split(" ", 1)[0]: s for s in out.split("\n=== ")[1:]}
    compare = sections["compare"].splitlines()
    assert compare[:4] == [
        "compare (resp-demo-4-compare) ===",
        "[choice 0, finish completed]",
        "(reasoning) Compare the tenths: 9.9 has 9 tenths, 9.11 has 1 tenth.",
        "**9.9** is bigger.",
    ]
    events = compare[4]
    assert events.startswith("(events) response.created → response.in_progress → ")
    assert "response.reasoning_text.delta ×" in events and "response.output_text.done" in events
    assert events.endswith("→ response.completed")
    forecast = sections["forecast"].splitlines()
    assert forecast[1:4] == [
        "[choice 0, finish tool_use]",
        "(reasoning) A forecast answers it: call get_weather.",
        '(tool call) get_weather({"location": "杭州", "days": 5})',
    ]
    assert forecast[4].startswith("(events) message_start → content_block_start → ")
    assert forecast[4].endswith("→ message_delta → message_stop")


def _worker(
    bootstrap: str,
    redis_url: str,
    topics: dict[str, str],
    group: str,
    prefix: str,
    *extra: str,
    log: Path,
) -> WorkerProcess:
    return WorkerProcess(
        bootstrap, redis_url, topics["input"], topics["output"], topics["dlq"], group, prefix,
        extra=list(extra), log_path=log,
    ).start()  # fmt: skip


def _topics(new_topic: Callable[..., str], partitions: int) -> dict[str, str]:
    """Fresh input, output and dead-letter topics for one test."""
    return {
        "input": new_topic(partitions, "in"),
        "output": new_topic(partitions, "out"),
        "dlq": new_topic(1, "dlq"),
    }


def test_publish_run_tail_round_trip(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    redis_url: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    topics = _topics(new_topic, 2)
    gens = make_generations(deepseek, 12, seed=11)
    # Half as ChunkRecord JSONL without seq (publish assigns it), half as raw SSE lines.
    jsonl = tmp_path / "records.jsonl"
    with jsonl.open("w") as f:
        for rec in interleave(gens[:6], seed=12):
            f.write(json.dumps({k: v for k, v in rec.items() if k != "seq"}) + "\n")
    sse = tmp_path / "engine.sse"
    with sse.open("w") as f:
        for g in gens[6:]:
            for rec in g.records[:-1]:
                f.write(
                    "data: "
                    + json.dumps({"request_id": g.request_id, **rec["generate_chunk"]})
                    + "\n\n"
                )
        f.write("data: [DONE]\n\n")
    for path in (jsonl, sse):
        proc = cli(
            "publish", str(path), "--bootstrap-servers", kafka_bootstrap, "--topic", topics["input"]
        )
        assert proc.returncode == 0, proc.stderr.decode()
    worker = _worker(
        kafka_bootstrap,
        redis_url,
        topics,
        f"g-{uuid.uuid4().hex[:6]}",
        f"p{uuid.uuid4().hex[:6]}:",
        log=tmp_path / "w.log",
    )
    try:
        raw = cli(
            "tail", "--raw", "--bootstrap-servers", kafka_bootstrap, "--topic", topics["output"],
            "--requests", "12", timeout=120,
        )  # fmt: skip
        assert raw.returncode == 0, raw.stderr.decode()
        lines = [json.loads(line) for line in raw.stdout.decode().splitlines()]
        texts: dict[str, str] = {}
        for line in lines:
            if line["value"] == "[DONE]":
                continue
            for c in line["value"]["choices"]:
                d = c["delta"]  # DeepSeek V4 thinks by default: plain text is reasoning
                text = (d.get("reasoning") or "") + (d.get("content") or "")
                texts[line["key"]] = texts.get(line["key"], "") + text
        assert texts == {g.request_id: g.expected for g in gens}
        pretty = cli(
            "tail",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--topic",
            topics["output"],
            "--requests",
            "12",
        )
        out = pretty.stdout.decode()
        for g in gens:
            assert f"=== {g.request_id} ===" in out
            assert f"(reasoning) {g.expected}" in out
    finally:
        worker.stop()


def test_sse_lines_become_numbered_records() -> None:
    lines = [
        ": keep-alive",
        'data: {"request_id": "a", "choices": [{"index": 0, "token_ids": [1]}]}',
        "",
        'data: {"request_id": "a", "choices": [{"token_ids": [2], "finish_reason": "stop"}]}',
        "data: [DONE]",
    ]
    recs = list(sse_records(lines, context={"model": "m"}))
    assert [r.get("type", "chunk") for r in recs] == ["chunk", "chunk", "end"]
    assert recs[0]["model"] == "m" and "model" not in recs[1]
    assert recs[1]["generate_chunk"]["choices"][0]["token_ids"] == [2]


def test_replay_from_kafka_equals_the_live_run(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    redis_url: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    from tests.integration.harness import publish

    live = _topics(new_topic, 3)
    gens = make_generations(deepseek, 40, seed=21)
    asyncio.run(publish(kafka_bootstrap, live["input"], interleave(gens, seed=22)))
    w = _worker(
        kafka_bootstrap,
        redis_url,
        live,
        f"live-{uuid.uuid4().hex[:6]}",
        "live:",
        log=tmp_path / "live.log",
    )
    first = asyncio.run(read_all(kafka_bootstrap, live["output"], lambda o: done_count(o) >= 40))
    w.stop()
    verify(first, gens)
    # Reprocess the same input topic: another group, state namespace and output topic.
    again = {**live, "output": new_topic(3, "replay"), "dlq": new_topic(1, "dlq")}
    r = _worker(
        kafka_bootstrap, redis_url, again, f"replay-{uuid.uuid4().hex[:6]}", "replay:",
        "--reset", "earliest", log=tmp_path / "replay.log",
    )  # fmt: skip
    second = asyncio.run(read_all(kafka_bootstrap, again["output"], lambda o: done_count(o) >= 40))
    r.stop()

    def by_request(outs: list) -> dict[str, list[tuple[str, str, bytes]]]:  # type: ignore[type-arg]
        d: dict[str, list[tuple[str, str, bytes]]] = {}
        for o in outs:
            d.setdefault(o.key, []).append(
                (o.headers["derender-seq"], o.headers["derender-part"], o.value)
            )
        return d

    assert by_request(second) == by_request(first)


def test_reset_to_a_timestamp_reprocesses_only_later_records(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    redis_url: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    import time

    from tests.integration.harness import publish

    topics = _topics(new_topic, 2)
    before = make_generations(deepseek, 5, seed=31, prefix="before")
    after = make_generations(deepseek, 5, seed=32, prefix="after")
    asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(before, seed=33)))
    time.sleep(0.05)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.05)
    asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(after, seed=34)))
    w = _worker(
        kafka_bootstrap, redis_url, topics, f"ts-{uuid.uuid4().hex[:6]}", "ts:",
        "--reset", str(cut_ms), log=tmp_path / "ts.log",
    )  # fmt: skip
    try:
        outs = asyncio.run(
            read_all(kafka_bootstrap, topics["output"], lambda o: done_count(o) >= 5)
        )
    finally:
        w.stop()
    verify(outs, after)
    assert {o.key for o in outs} == {g.request_id for g in after}
