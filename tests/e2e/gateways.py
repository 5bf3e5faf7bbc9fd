"""The e2e session's gateways and what the tests read besides the clients' answers.

- `Gateway`: a `derender-worker gateway` process (tests/gateway/conftest.py starts it the
  same way) with the reply partitions it owns, and a client that notes the request id of
  every answer (the gateway's `x-request-id`, the answer's `id`).
- `TopicWatch`: every record of the session's input and output topics, by key, read from
  the start on a thread of its own: where each request's outputs went, its `abort`
  record, its end.
- `engine_metrics`: the engine's own count of running requests and generated tokens.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import openai
from aiokafka import AIOKafkaConsumer
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.conftest import GatewayProcess

WAIT_TIMEOUT_S = 30.0
# What the fault cases measured, printed in the session's summary: (case, what).
NOTES: list[tuple[str, str]] = []
# The HTTP clients made by `Gateway.client`, closed after each test (close_clients).
CLIENTS: list[httpx2.Client] = []


def close_clients() -> None:
    while CLIENTS:
        CLIENTS.pop().close()


@dataclass
class Gateway:
    name: str
    process: GatewayProcess
    partitions: frozenset[int]
    served: list[str] = field(default_factory=list)  # request ids, in order

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def alive(self) -> bool:
        return self.process.proc is not None and self.process.proc.poll() is None

    def client(self, timeout_s: float = 60.0) -> openai.OpenAI:
        """The official SDK on this gateway; every answer's request id lands in `served`."""

        def note(response: httpx2.Response) -> None:
            if rid := response.headers.get("x-request-id"):
                self.served.append(rid)

        http = httpx2.Client(event_hooks={"response": [note]}, timeout=timeout_s)
        CLIENTS.append(http)
        return openai.OpenAI(
            api_key="e2e", base_url=f"{self.url}/v1", http_client=http, max_retries=0
        )

    def metric(self, name: str, **labels: str) -> float:
        """One sample of the gateway's /metrics (0 when absent)."""
        return _sample(_get(f"{self.url}/metrics"), name, labels)

    def settled_metric(self, name: str, until: Callable[[float], bool], **labels: str) -> float:
        """The sample once `until` holds, or as it stands after WAIT_TIMEOUT_S.

        The gateway counts a request when it is done with it (engine request stopped,
        records closed), which can be just after its client read the answer's last byte.
        """
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while not until(value := self.metric(name, **labels)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return value


def gateway_argv(
    engine_url: str, bootstrap: str, topics: dict[str, str], extra: Sequence[str] = ()
) -> list[str]:
    return [
        sys.executable, "-m", "worker", "gateway",
        "--engine-url", engine_url,
        "--bootstrap-servers", bootstrap,
        "--input-topic", topics["input"],
        "--output-topic", topics["output"],
        "--host", "127.0.0.1", "--port", "0",
        *extra,
    ]  # fmt: skip


def start_gateway(
    name: str,
    partitions: Sequence[int],
    engine_url: str,
    bootstrap: str,
    topics: dict[str, str],
    log: Path,
    extra: Sequence[str] = (),
) -> Gateway:
    spec = ",".join(map(str, partitions))
    argv = gateway_argv(engine_url, bootstrap, topics, ["--reply-partitions", spec, *extra])
    return Gateway(name, GatewayProcess(argv, log).start(), frozenset(partitions))


@dataclass(frozen=True)
class Rec:
    topic: str
    partition: int
    offset: int
    headers: dict[str, str]
    value: bytes

    @property
    def kind(self) -> str:
        return self.headers.get("derender-kind", "")

    def json(self) -> Any:
        return json.loads(self.value) if self.value.startswith(b"{") else None


class TopicWatch:
    """Every record of some topics, from their start, by key; `wait` for a condition on
    one key's records."""

    def __init__(self, bootstrap: str, topics: Sequence[str]) -> None:
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self._records: dict[str, list[Rec]] = defaultdict(list)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="e2e-watch", daemon=True)

    def __enter__(self) -> TopicWatch:
        self._thread.start()
        if not self._ready.wait(WAIT_TIMEOUT_S):
            raise AssertionError(f"the topic watch did not start: {self._error}")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # (a test waiting on it says why)
            self._error = e
            self._ready.set()
            with self._cond:
                self._cond.notify_all()

    async def _run(self) -> None:
        consumer = AIOKafkaConsumer(
            *self.topics,
            bootstrap_servers=self.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        self._ready.set()
        try:
            while not self._stop.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                if not batch:
                    continue
                with self._cond:
                    for tp, msgs in batch.items():
                        for m in msgs:
                            key = m.key.decode() if m.key else ""
                            headers = {k: v.decode() for k, v in m.headers}
                            rec = Rec(tp.topic, tp.partition, m.offset, headers, m.value)
                            self._records[key].append(rec)
                    self._cond.notify_all()
        finally:
            await consumer.stop()

    def records(self, key: str, topic: str | None = None) -> list[Rec]:
        with self._cond:
            return [r for r in self._records.get(key, []) if topic in (None, r.topic)]

    def wait(
        self,
        key: str,
        until: Callable[[list[Rec]], bool],
        topic: str | None = None,
        timeout_s: float = WAIT_TIMEOUT_S,
    ) -> list[Rec]:
        """The key's records (of `topic`) once `until` holds; AssertionError after
        `timeout_s`, with what was seen."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if self._error is not None:
                    raise AssertionError(f"the topic watch failed: {self._error!r}")
                recs = [r for r in self._records.get(key, []) if topic in (None, r.topic)]
                if until(recs):
                    return recs
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(r.topic, r.partition, r.value[:120]) for r in recs]
                    raise AssertionError(f"{key}: not within {timeout_s:g}s; seen {seen}")
                self._cond.wait(min(left, 0.5))


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def _sample(text: str, name: str, labels: dict[str, str]) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


@dataclass(frozen=True)
class EngineCounts:
    running: float  # vllm:num_requests_running
    generated: float  # vllm:generation_tokens_total


def engine_metrics(engine_url: str) -> EngineCounts:
    text = _get(f"{engine_url}/metrics")
    return EngineCounts(
        _sample(text, "vllm:num_requests_running", {}),
        _sample(text, "vllm:generation_tokens_total", {}),
    )


def wait_engine_idle(engine_url: str, timeout_s: float = 10.0) -> EngineCounts:
    """The engine's counts once it runs no request; AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = engine_metrics(engine_url)
        if counts.running == 0:
            return counts
        if time.monotonic() > deadline:
            raise AssertionError(f"the engine still runs requests after {timeout_s:g}s: {counts}")
        time.sleep(0.1)
