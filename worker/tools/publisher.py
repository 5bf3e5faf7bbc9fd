"""Publishing ChunkRecords: the engine side of the contract, as a library and a command.

`Publisher` numbers each request's records (`seq` 0, 1, 2, …) and keys them by
`request_id`, so all of a request lands on one partition in order. `sse_records` turns
raw vLLM `/inference/v1/generate` SSE lines (`data: {GenerateStreamResponse}` …
`data: [DONE]`) into ChunkRecords.

    async with Publisher("localhost:9092") as pub:
        await pub.chunk("chatcmpl-1", {"choices": [{"index": 0, "token_ids": [9707]}]},
                        context={"model": "deepseek-v4", "chat_request": {...}})
        await pub.end("chatcmpl-1")

A request's trace context goes along as the W3C record headers the worker copies onto
its outputs: `pub.trace(request_id, traceparent)` before its first record (or
`Publisher(..., headers={"traceparent": ...})` for every record, as `publish
--traceparent` does).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer

from worker.constants import INPUT_TOPIC
from worker.tools.control_reader import ControlReader

SSE_DATA = "data:"
SSE_DONE = "[DONE]"


class Publisher:
    """Sends ChunkRecords to the input topic: each request's numbered (`seq`) and keyed by
    its `request_id`; every record acknowledged by the broker when the context exits."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = INPUT_TOPIC,
        headers: Mapping[str, str] | None = None,
        *,
        control_topic: str | None = None,
        linger_ms: int = 5,
        **producer: Any,
    ) -> None:
        self.topic = topic
        # `control_topic`: follow the worker's early-stop records and hold back the chunks
        # of a request it has stopped (its `end` / `abort` still go, to close it).
        self.control = (
            ControlReader(bootstrap_servers, control_topic, **_client_kwargs(producer))
            if control_topic
            else None
        )
        self.held_back = 0  # chunk records not sent: their request was stopped
        self.tokens_held_back = 0  # the token ids in them: what the engine did not need
        # Record headers: on every record, and per request (`trace`).
        self._headers = [(k, v.encode()) for k, v in (headers or {}).items()]
        self._request_headers: dict[str, list[tuple[str, bytes]]] = {}
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers, acks="all", linger_ms=linger_ms, **producer
        )
        self._next_seq: dict[str, int] = {}
        self._pending: list[asyncio.Future[Any]] = []
        self.sent = 0

    async def __aenter__(self) -> Publisher:
        await self._producer.start()
        if self.control is not None:
            try:
                await self.control.__aenter__()
            except BaseException:
                await self._producer.stop()
                raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.flush()
        finally:
            await self._producer.stop()
            if self.control is not None:
                await self.control.__aexit__(None, None, None)

    def stopped(self, request_id: str) -> bool:
        """The worker asked the engine to stop this request (`control_topic`)."""
        return self.control is not None and self.control.get(request_id) is not None

    def trace(
        self,
        request_id: str,
        traceparent: str,
        tracestate: str | None = None,
        baggage: str | None = None,
    ) -> None:
        """The request's records carry this W3C trace context (its creation context: the
        engine's span of the request), and the worker's outputs continue its trace."""
        given = (("traceparent", traceparent), ("tracestate", tracestate), ("baggage", baggage))
        trace = [(k, v.encode()) for k, v in given if v]
        names = {k for k, _ in trace}
        self._request_headers[request_id] = [h for h in self._headers if h[0] not in names] + trace

    def next_seq(self, request_id: str) -> int:
        return self._next_seq.get(request_id, 0)

    def forget(self, request_id: str) -> None:
        """Drop what is kept for a request (its numbering, its headers) once its last
        record is sent: a long-running publisher, such as the gateway, calls it."""
        self._next_seq.pop(request_id, None)
        self._request_headers.pop(request_id, None)

    async def record(self, record: dict[str, Any]) -> None:
        """Send one ChunkRecord; a missing `seq` is assigned (0, 1, 2, … per request)."""
        rid = record["request_id"]
        if (
            self.control is not None
            and record.get("type", "chunk") == "chunk"
            and self.control.get(rid) is not None
        ):
            self.held_back += 1
            for c in (record.get("generate_chunk") or {}).get("choices") or []:
                self.tokens_held_back += len(c.get("token_ids") or [])
            return
        if "seq" not in record:
            record = {**record, "seq": self.next_seq(rid)}
        self._next_seq[rid] = max(self.next_seq(rid), int(record["seq"]) + 1)
        value = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
        headers = self._request_headers.get(rid, self._headers)
        if record.get("type") in ("end", "abort"):  # (the request's last record)
            self._request_headers.pop(rid, None)
        self._pending.append(
            await self._producer.send(self.topic, value, key=rid.encode(), headers=headers)
        )
        self.sent += 1
        if len(self._pending) >= 1000:
            await self.flush()

    async def chunk(
        self,
        request_id: str,
        generate_chunk: dict[str, Any],
        context: dict[str, Any] | None = None,
    ) -> None:
        """One generate event; `context` (model, chat_request, prompt ids…) on seq 0."""
        rec: dict[str, Any] = {"request_id": request_id, "generate_chunk": generate_chunk}
        if context and self.next_seq(request_id) == 0:
            rec.update(context)
        await self.record(rec)

    async def end(self, request_id: str) -> None:
        await self.record({"request_id": request_id, "type": "end"})

    async def abort(self, request_id: str) -> None:
        await self.record({"request_id": request_id, "type": "abort"})

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged by the broker."""
        pending, self._pending = self._pending, []
        if pending:
            await asyncio.gather(*pending)


def _client_kwargs(producer: dict[str, Any]) -> dict[str, Any]:
    """The connection settings (security, client id) a consumer shares with the producer."""
    shared = ("security_protocol", "ssl_context", "sasl_", "client_id", "request_timeout_ms")
    return {k: v for k, v in producer.items() if k.startswith(shared)}


def sse_records(
    lines: Iterable[str], context: dict[str, Any] | None = None, request_id: str | None = None
) -> Iterator[dict[str, Any]]:
    """ChunkRecords (without seq) from vLLM generate SSE lines.

    Each `data: {...}` event becomes a `chunk` record of its `request_id` (or the given
    one); `data: [DONE]` ends every request seen since the last `[DONE]`. `context` is
    attached to each request's first record.
    """
    open_requests: dict[str, None] = {}
    for raw in lines:
        line = raw.strip()
        if not line.startswith(SSE_DATA):
            continue  # comments, `event:` lines, blank separators
        data = line[len(SSE_DATA) :].strip()
        if data == SSE_DONE:
            for rid in open_requests:
                yield {"request_id": rid, "type": "end"}
            open_requests.clear()
            continue
        event = json.loads(data)
        rid = request_id or event.get("request_id")
        if not rid:
            raise ValueError("an SSE event without request_id (pass --request-id)")
        rec: dict[str, Any] = {"request_id": rid, "generate_chunk": event}
        if rid not in open_requests:
            open_requests[rid] = None
            if context:
                rec.update(context)
        yield rec
