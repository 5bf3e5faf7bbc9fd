"""What the chaos suites share: waiting on conditions, a live tail of a topic, group offsets,
metrics, the chaos launcher, and the in-process oracle that says what the worker must publish.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.integration.harness import Output, WorkerProcess
from tests.support.helpers import Run
from worker.config import load_registry
from worker.constants import H_KIND, H_PART, H_REQUEST_ID, H_SEQ
from worker.core.model import Registry
from worker.ports import InRecord

T = TypeVar("T")

# Every record the chaos suites publish carries this CreateTime, so `created` (taken from the
# seq-0 record's timestamp when the record has none) is the same in the oracle.
FIXED_TS_MS = 1_700_000_000_000
# `python -m` module of the worker with fault points (tests/chaos/launch.py).
LAUNCHER = "tests.chaos.launch"

Record = dict[str, Any] | tuple[str | None, bytes]


def chaos_env(**points: Any) -> dict[str, Any]:
    """worker_factory kwargs for a worker with fault points (see launch.py)."""
    return {"module": LAUNCHER, "env": {"DERENDER_CHAOS": json.dumps(points)}}


def wait_until(cond: Callable[[], T], timeout_s: float, what: str, every_s: float = 0.05) -> T:
    """Poll `cond` until it returns something truthy; fail with `what` after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)


def wait_exit(w: WorkerProcess, timeout_s: float = 30) -> int:
    assert w.proc is not None
    wait_until(lambda: w.proc is not None and w.proc.poll() is not None, timeout_s, "exit")
    return w.proc.returncode


def process_state(pid: int) -> str:
    """The kernel's one-letter state of a process: R, S, T (stopped), Z, …"""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def wait_log(w: WorkerProcess, text: str, timeout_s: float = 30) -> str:
    return wait_until(
        lambda: w.log_text() if text in w.log_text() else "",
        timeout_s,
        f"{text!r} in the worker log; tail:\n{w.log_tail()}",
    )


class Tail:
    """Reads a topic from its start on a background thread; `wait` polls what arrived."""

    def __init__(
        self, bootstrap: str, topic: str, *, isolation_level: str = "read_uncommitted"
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.isolation_level = isolation_level
        self._outputs: list[Output] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"tail-{topic}", daemon=True)

    def __enter__(self) -> Tail:
        self._thread.start()
        if not self._ready.wait(30):
            raise AssertionError(f"the tail of {self.topic} did not start")
        self._check()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:
            self._error = e
            self._ready.set()

    async def _main(self) -> None:
        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
            isolation_level=self.isolation_level,
        )
        await consumer.start()
        try:
            self._ready.set()
            while not self._stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                got = [
                    Output(
                        m.key.decode() if m.key else "",
                        {k: v.decode() for k, v in m.headers},
                        m.value,
                        tp.partition,
                        m.offset,
                    )
                    for tp, msgs in batch.items()
                    for m in msgs
                ]
                if got:
                    with self._lock:
                        self._outputs.extend(got)
        finally:
            await consumer.stop()

    def _check(self) -> None:
        if self._error is not None:
            raise AssertionError(f"the tail of {self.topic} failed: {self._error!r}")

    def snapshot(self) -> list[Output]:
        self._check()
        with self._lock:
            return list(self._outputs)

    def wait(
        self, cond: Callable[[list[Output]], bool], timeout_s: float, what: str
    ) -> list[Output]:
        return wait_until(
            lambda: (lambda s: s if cond(s) else [])(self.snapshot()), timeout_s, what
        )

    def wait_done(self, request_ids: Iterable[str], timeout_s: float = 90) -> list[Output]:
        """Until every named request has its `[DONE]`."""
        want = set(request_ids)
        return self.wait(
            lambda o: want <= {x.key for x in o if x.value == b"[DONE]"},
            timeout_s,
            f"[DONE] of {len(want)} requests",
        )


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Committed offset per partition of `group` (0 where it committed none)."""

    async def fetch() -> dict[int, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
        )
        await consumer.start()
        try:
            out = {}
            for p in range(partitions):
                out[p] = await consumer.committed(TopicPartition(topic, p)) or 0
            return out
        finally:
            await consumer.stop()

    return asyncio.run(fetch())


def scrape(port: int) -> dict[str, float]:
    """The worker's /metrics as {"name{labels}": value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        body = resp.read().decode()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def records_counted(port: int) -> Counter[str]:
    """The worker's `derender_records_total` by result (empty until it serves metrics)."""
    try:
        metrics = scrape(port)
    except OSError:
        return Counter()
    out: Counter[str] = Counter()
    for k, v in metrics.items():
        if k.startswith('derender_records_total{result="') and v:
            out[k.split('"')[1]] = int(v)
    return out


def wait_counted(port: int, records: int, timeout_s: float = 120) -> Counter[str]:
    """Until the worker has counted `records` input records; their count by result."""
    return wait_until(
        lambda: (lambda c: c if sum(c.values()) >= records else None)(records_counted(port)),
        timeout_s,
        f"the worker to count {records} records",
    )


# -- what the worker must publish ---------------------------------------------------------


@functools.cache
def worker_registry() -> Registry:
    """The registry `derender-worker run` uses without `--models`."""
    return load_registry(None)


@dataclass
class Expected:
    """The pipeline's answer to a sequence of records (the memory store between batches)."""

    outputs: list[Output] = field(default_factory=list)
    dead_letters: list[tuple[bytes, str]] = field(default_factory=list)  # (value, error)
    results: Counter[str] = field(default_factory=Counter)


def encode(record: Record) -> tuple[str | None, bytes]:
    if isinstance(record, tuple):
        return record
    return record["request_id"], json.dumps(record).encode()


def oracle(
    records: list[Record],
    max_record_bytes: int = 8 * 1024 * 1024,
    timestamp_ms: int = FIXED_TS_MS,
    batch: int = 64,
    control: bool = False,
) -> Expected:
    """Run records through the one loop in order, as `replay` does (`control`: with the
    early-stop records among the outputs, as `replay --control`).

    Requests are independent, so per request this is what a worker must publish whatever
    its batching and however the records are spread over partitions (the key keeps a
    request's records in order).
    """
    ins = []
    for i, r in enumerate(records):
        key, value = encode(r)
        ins.append(InRecord(value, key, timestamp_ms, f"oracle/{i}"))
    exp = Expected()
    run = Run(worker_registry(), control=control)
    for at in range(0, len(ins), batch):
        res = run.feed_records(ins[at : at + batch], max_record_bytes).result
        for o in res.outputs:
            headers = {k: v.decode() for k, v in o.headers}
            exp.outputs.append(Output(o.key, headers, o.value, -1, -1))
        for d in res.dead_letters:
            exp.dead_letters.append((d.value, dict(d.headers)["derender-error"].decode()))
        exp.results.update(res.results)
    return exp


Logical = tuple[int, int, str, bytes]  # (seq, part, kind, value)


def per_request(outputs: Iterable[Output]) -> dict[str, list[Logical]]:
    """Each request's outputs in arrival order, with exact repeats (a redelivery's same
    triple and same bytes) dropped. A repeat with other bytes is an error."""
    seen: dict[tuple[str, str, str], set[bytes]] = defaultdict(set)
    out: dict[str, list[Logical]] = defaultdict(list)
    for o in outputs:
        h = o.headers
        triple = (h[H_REQUEST_ID], h[H_SEQ], h[H_PART])
        if o.value in seen[triple]:
            continue
        # A second value under one triple: allowed only for seq -1 (the seq was unreadable).
        assert not seen[triple] or triple[1] == "-1", f"{triple}: two different outputs"
        seen[triple].add(o.value)
        assert o.key == triple[0], f"{triple}: key {o.key!r}"
        out[triple[0]].append((int(triple[1]), int(triple[2]), h[H_KIND], o.value))
    return dict(out)


def error_code(value: bytes) -> str:
    return str(json.loads(value)["error"]["code"])


def describe(items: list[Logical]) -> list[tuple[int, int, str]]:
    """(seq, part, kind or error code): a readable summary for assertions."""
    return [(s, p, error_code(v) if k == "error" else k) for s, p, k, v in items]
