"""Per-record cost of trace propagation and OpenTelemetry spans.

The batch path of `run` without its servers: the Kafka source's record conversion
(`KafkaSource.poll` over aiokafka ConsumerRecords handed over by a consumer stand-in) and
`loop.run_batch` (decode, core, outputs with their headers, memory store, a list sink),
with DeepSeek V4's real tokenizer: 200 interleaved chat requests, 4 token ids a record,
500 records a batch. CPU time of the whole process per input record (`time.process_time`:
with tracing on that includes the batch span processor's thread, which encodes the spans
and posts them over HTTP to an OTLP receiver running in another process).

Cases:
  off, no headers       the common case: inputs without headers, tracing off
  off, trace headers    traceparent + tracestate + baggage on every input, copied on
  on, trace headers     the same with OTEL_EXPORTER_OTLP_ENDPOINT set (spans exported)
  on, no headers        inputs without context: send spans under the process span

It also runs on a checkout from before the propagation (only the `off, no headers` rows,
the ones an old checkout can run): `PYTHONPATH=<old checkout> python bench/tracing_bench.py`.

    .venv/bin/python bench/tracing_bench.py [--quick] [--no-write] [--out FILE] [--label L]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, code_version, cpu_model

import worker
from worker.adapters.broker.kafka_source import KafkaSource
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch, run_sync
from worker.config import load_registry
from worker.ports import Batch, InRecord, Partition

REQUESTS = 200
RECORDS_PER_REQUEST = 25
TOKENS_PER_RECORD = 4
BATCH = 500


def headers_of(request_id: str) -> tuple[tuple[str, bytes], ...]:
    """A request's W3C headers: each request is its own trace (an engine's span of it)."""
    n = int(request_id.rsplit("-", 1)[1]) + 1
    return (
        ("traceparent", f"00-{n:032x}-{n:016x}-01".encode()),
        ("tracestate", b"engine=1"),
        ("baggage", b"tenant.tier=gold"),
    )


HAS_HEADERS = "headers" in InRecord.__struct_fields__
# What a before-propagation checkout cannot run is skipped there.


class ListSource:
    def __init__(self) -> None:
        self.offset = 0

    async def poll(self) -> Batch | None:
        return None

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        pass

    async def commit(self, offsets: Any) -> None:
        pass

    def scope(self, partition: Partition) -> str:
        return "bench/0"


class CountingSink:
    def __init__(self) -> None:
        self.outputs = 0

    async def send(self, outputs: list[Any], dead_letters: list[Any]) -> None:
        self.outputs += len(outputs)


def _records(ids: list[int]) -> list[dict[str, Any]]:
    per: list[list[dict[str, Any]]] = []
    ctx = {"model": "deepseek-v4", "chat_request": {"stream": True}}
    for r in range(REQUESTS):
        rid = f"chatcmpl-{r}"
        recs = []
        for s in range(RECORDS_PER_REQUEST):
            part = ids[(r + s * TOKENS_PER_RECORD) % 200 :][:TOKENS_PER_RECORD]
            rec: dict[str, Any] = {
                "request_id": rid,
                "seq": s,
                "generate_chunk": {"choices": [{"index": 0, "token_ids": part}]},
            }
            if s == 0:
                rec.update(ctx)
            recs.append(rec)
        recs.append({"request_id": rid, "seq": RECORDS_PER_REQUEST, "type": "end"})
        per.append(recs)
    out = []
    for i in range(RECORDS_PER_REQUEST + 1):  # round robin: every batch touches many requests
        out += [recs[i] for recs in per]
    return out


def _batches(records: list[dict[str, Any]], headers: bool) -> list[Batch]:
    enc = msgspec.json.Encoder()
    batches = []
    for start in range(0, len(records), BATCH):
        ins = []
        for i, rec in enumerate(records[start : start + BATCH]):
            args: tuple[Any, ...] = (enc.encode(rec), rec["request_id"], 1_800_000_000_000)
            origin = ("in", 0, start + i)
            ins.append(
                InRecord(*args, origin, 0, headers_of(rec["request_id"]) if headers else None)
                if HAS_HEADERS
                else InRecord(*args, origin, 0)
            )
        batches.append(Batch(ins, {0: start}, {0: start + len(ins) - 1}))
    return batches


def loop_case(batches: list[Batch], runner: Callable[..., Any]) -> Callable[[], int]:
    registry = load_registry(None)

    def run() -> int:
        source, sink = ListSource(), CountingSink()
        checkpoint = Checkpoint(source, MemoryStore())
        for b in batches:
            run_sync(
                runner(
                    b,
                    registry=registry,
                    sink=sink,
                    checkpoint=checkpoint,
                    max_record_bytes=1 << 20,
                )
            )
        return sink.outputs

    return run


def source_case(records: list[dict[str, Any]], headers: bool) -> Callable[[], int]:
    """KafkaSource.poll turning fetched ConsumerRecords into InRecords."""
    from aiokafka import TopicPartition
    from aiokafka.structs import ConsumerRecord

    tp = TopicPartition("in", 0)
    enc = msgspec.json.Encoder()
    msgs = [
        ConsumerRecord(
            "in",
            0,
            i,
            1,
            0,
            r["request_id"].encode(),
            enc.encode(r),
            None,
            1,
            2,
            headers_of(r["request_id"]) if headers else (),
        )
        for i, r in enumerate(records)
    ]
    fetched = [{tp: msgs[i : i + BATCH]} for i in range(0, len(msgs), BATCH)]

    class Consumer:
        def __init__(self) -> None:
            self.i = 0

        async def getmany(self, *tps: Any, timeout_ms: int, max_records: int) -> Any:
            self.i += 1
            return fetched[(self.i - 1) % len(fetched)]

    def run() -> int:
        src = KafkaSource(Consumer(), "g", lambda: [tp], timeout_ms=1, max_records=BATCH)  # type: ignore[arg-type]
        n = 0
        for _ in fetched:
            batch = run_sync(src.poll())
            assert batch is not None
            n += len(batch.records)
        return n

    return run


def measure(fns: list[Callable[[], int]], repeats: int) -> list[tuple[float, float, int]]:
    """(best, median) process CPU seconds of each, round robin after a warm-up."""
    counts = [fn() for fn in fns]
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times, strict=True):
            gc.collect()
            t0 = time.process_time()
            fn()
            ts.append(time.process_time() - t0)
    return [(min(ts), statistics.median(ts), c) for ts, c in zip(times, counts, strict=True)]


RECEIVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.support.otlp_receiver import otlp_receiver
with otlp_receiver() as r:
    print(r.url, flush=True)
    sys.stdin.read()
    print(len(r.spans), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    repeats = 3 if args.quick else 9

    registry = load_registry(None)  # (DeepSeek V4's real tokenizer: ids of real text)
    tok = registry.models[registry.default].tokenizer
    text = "The quick brown fox jumps over the lazy dog. 日本語 😀 code() " * 20
    ids = list(tok.encode(text, add_special_tokens=False).ids)[:400]
    records = _records(ids)
    plain = _batches(records, headers=False)
    rows: list[tuple[str, Callable[[], int]]] = [
        ("source: poll, no headers", source_case(records, False)),
        ("source: poll, trace headers", source_case(records, True)),
        ("loop: off, no headers", loop_case(plain, run_batch)),
    ]
    receiver = None
    if HAS_HEADERS:
        traced = _batches(records, headers=True)
        rows.append(("loop: off, trace headers", loop_case(traced, run_batch)))
        receiver = subprocess.Popen(
            [sys.executable, "-c", RECEIVER, str(REPO)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert receiver.stdout is not None
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.stdout.readline().strip()
        from worker.observe.tracing import traced_run_batch
        from worker.settings import FLAGS, Settings

        settings = Settings(**{f.attr: f.default for f in FLAGS})
        on = traced_run_batch(settings, run_batch)
        rows.append(("loop: on, trace headers", loop_case(traced, on)))
        rows.append(("loop: on, no headers", loop_case(plain, on)))
    load = os.getloadavg()
    results = measure([fn for _, fn in rows], repeats)
    spans = ""
    if receiver is not None:
        time.sleep(6)  # (past the batch span processor's 5 s schedule: what is queued goes)
        assert receiver.stdin is not None
        receiver.stdin.close()
        spans = receiver.stdout.readline().strip() if receiver.stdout else ""
        receiver.wait(10)
    n_in = len(records)
    lines = [
        f"# tracing bench {args.label}".rstrip(),
        "",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}, no GPU, load average at start "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"- python {platform.python_version()}, code {code_version()} "
        f"({Path(worker.__file__).parent.parent})",
        f"- workload: {REQUESTS} chat requests × {RECORDS_PER_REQUEST} records of "
        f"{TOKENS_PER_RECORD} ids + end, interleaved = {n_in} input records, batches of "
        f"{BATCH}; process CPU time, best and median of {repeats}",
        "",
        "| case | µs / input record (best) | (median) | outputs |",
        "|---|---|---|---|",
    ]
    for (name, _), (best, median, count) in zip(rows, results, strict=True):
        lines.append(f"| {name} | {best / n_in * 1e6:.2f} | {median / n_in * 1e6:.2f} | {count} |")
    if spans:
        lines += [
            "",
            f"spans received by the OTLP receiver over the tracing-on runs: {spans} "
            "(fewer than made: the batch span processor's queue, 2048, overflowed)",
        ]
    report = "\n".join(lines) + "\n"
    print(report)
    if not args.no_write:
        day = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
        suffix = f"-{args.label}" if args.label else ""
        out = Path(args.out or REPO / "bench" / "results" / f"tracing-{day}{suffix}.md")
        out.write_text(report)
        print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
