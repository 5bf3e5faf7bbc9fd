"""The exchange's control stop at its seams (no servers): a control record stops the read
of the generate stream at once, never a publish in progress, calls the engine's abort and
still publishes the request's `end`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import msgspec

from worker.gateway.exchange import Exchange, Services
from worker.gateway.metrics import GatewayMetrics
from worker.gateway.replies import Reply
from worker.wire.control import ControlRecord


class FakeStream:
    """A generate stream fed by the test, one event at a time."""

    def __init__(self) -> None:
        self.status = 200
        self.feed: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.closed = False

    async def events(self) -> AsyncGenerator[dict[str, Any], None]:
        while True:
            yield await self.feed.get()


class FakeEngine:
    def __init__(self) -> None:
        self.stream = FakeStream()
        self.aborted: list[str] = []

    @contextlib.asynccontextmanager
    async def generate(self, request: dict[str, Any], headers: Any) -> AsyncIterator[FakeStream]:
        try:
            yield self.stream
        finally:
            self.stream.closed = True

    async def abort(self, request_id: str) -> bool:
        self.aborted.append(request_id)
        return True


class FakePublisher:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.gate: asyncio.Event | None = None  # a publish waits for it when set
        self.publishing = asyncio.Event()

    def next_seq(self, request_id: str) -> int:
        return len(self.records)

    async def record(self, record: dict[str, Any]) -> None:
        self.records.append(record)  # (its seq is taken before the send, as Publisher's)
        self.publishing.set()
        if self.gate is not None:
            await self.gate.wait()


def exchange() -> tuple[Exchange, FakeEngine, FakePublisher, GatewayMetrics]:
    engine, publisher, metrics = FakeEngine(), FakePublisher(), GatewayMetrics()
    services = Services(engine, publisher, None, metrics, 30.0)  # type: ignore[arg-type]
    body = {"stream": True}
    return Exchange(services, "chat", b"{}", body, {}, None), engine, publisher, metrics


def event(*ids: int) -> dict[str, Any]:
    return {"choices": [{"index": 0, "token_ids": list(ids)}]}


def control(output_tokens: int) -> ControlRecord:
    return ControlRecord(request_id="r", reason="stop", seq=1, output_tokens=output_tokens)


def kinds(publisher: FakePublisher) -> list[str]:
    return [r.get("type", "chunk") for r in publisher.records]


async def until(condition: Any) -> None:
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(0.001)


def test_a_control_record_stops_the_read_at_once_and_the_end_is_published() -> None:
    async def main() -> None:
        ex, engine, publisher, metrics = exchange()
        task = ex.engine_task = asyncio.create_task(
            ex._generate(Reply(ex.request_id, 0), {}, {"api": "chat"})
        )
        for ids in ((1, 2), (3,)):
            engine.stream.feed.put_nowait(event(*ids))
        await until(lambda: len(publisher.records) == 2 and ex.reading)
        ex._halt(control(2))  # (the stream has nothing more: the wait for it is cancelled)
        await asyncio.wait_for(task, 5)
        assert kinds(publisher) == ["chunk", "chunk", "end"]
        assert engine.stream.closed and engine.aborted == [ex.request_id]
        assert metrics.control_stops.labels("stop")._value.get() == 1
        assert metrics.control_late_tokens._value.get() == 1  # (token 3, past the stop)

    asyncio.run(main())


def test_a_publish_in_progress_is_finished_before_the_stop() -> None:
    async def main() -> None:
        ex, engine, publisher, _ = exchange()
        publisher.gate = asyncio.Event()
        task = ex.engine_task = asyncio.create_task(
            ex._generate(Reply(ex.request_id, 0), {}, {"api": "chat"})
        )
        engine.stream.feed.put_nowait(event(1, 2))
        engine.stream.feed.put_nowait(event(3))  # (ready, but never read)
        await publisher.publishing.wait()
        ex._halt(control(2))
        ex._halt(control(2))  # (a repeat is ignored)
        publisher.gate.set()
        await asyncio.wait_for(task, 5)
        assert kinds(publisher) == ["chunk", "end"]
        assert engine.aborted == [ex.request_id]

    asyncio.run(main())


def test_a_request_cancelled_from_outside_is_still_aborted() -> None:
    async def main() -> None:
        ex, engine, publisher, _ = exchange()
        task = ex.engine_task = asyncio.create_task(
            ex._generate(Reply(ex.request_id, 0), {}, {"api": "chat"})
        )
        engine.stream.feed.put_nowait(event(1))
        await until(lambda: len(publisher.records) == 1 and ex.reading)
        ex._halt(control(1))
        task.cancel()  # (the client left at the same moment)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        assert task.cancelled()
        assert kinds(publisher) == ["chunk", "abort"]

    asyncio.run(main())


class FakeRecord:
    def __init__(self, key: bytes | None, value: bytes) -> None:
        self.key = key
        self.value = value


class FakeConsumer:
    """One batch of control records, then nothing."""

    def __init__(self, records: list[FakeRecord]) -> None:
        self.batches = [{"tp": records}]

    async def getmany(self, timeout_ms: int) -> dict[str, list[FakeRecord]]:
        if self.batches:
            return self.batches.pop()
        await asyncio.sleep(timeout_ms / 1000)
        return {}


def test_the_control_reader_hands_on_only_the_requests_it_generates() -> None:
    from worker.gateway.control import GatewayControl

    async def main() -> None:
        reader = GatewayControl("127.0.0.1:9", "control")
        halted: list[ControlRecord] = []
        reader.watch("mine", halted.append)
        reader.watch("broken", halted.append)
        reader.watch("done", halted.append)
        reader.unwatch("done")

        def value(rid: str) -> bytes:
            return msgspec.json.encode(control(3)).replace(b'"r"', f'"{rid}"'.encode())

        await reader._consumer.stop()  # (never started: the fake reads instead)
        reader._consumer = FakeConsumer(  # type: ignore[assignment]
            [
                FakeRecord(b"theirs", value("theirs")),
                FakeRecord(b"broken", b"not json"),
                FakeRecord(b"done", value("done")),
                FakeRecord(b"mine", value("mine")),
                FakeRecord(b"mine", value("mine")),  # (a repeat: handed on once)
                FakeRecord(None, b"{}"),
            ]
        )
        task = asyncio.create_task(reader._follow())
        await until(lambda: reader.ignored == 4)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert [h.request_id for h in halted] == ["mine"] and halted[0].output_tokens == 3
        assert reader.received == 1

    asyncio.run(main())
