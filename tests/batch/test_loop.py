"""The one loop's protocol with recording fakes: what happens in which order, and what a
failure of each kind does (no broker, no Redis: the integration and chaos suites run the
real adapters through the same `run_batch`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    MessageSizeTooLargeError,
    TopicAuthorizationFailedError,
)
from redis.exceptions import AuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.support.helpers import ListSink, ListSource, chunk, end
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import SILENT, run_batch
from worker.batch.steps import StepTimeout, within
from worker.config import load_registry
from worker.constants import H_KIND, H_PART, H_REQUEST_ID, H_SEQ
from worker.failures import ConfigError, Kind, classify
from worker.observe.metrics import Metrics
from worker.ports import Batch, InRecord, OutputsRefused, OutRecord, Partition, StateWrite, Stored
from worker.run.accounts import Accounts
from worker.run.runner import Runner
from worker.settings import add_flags, from_args

REGISTRY = load_registry(None)


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []


class RecordingStore:
    """A MemoryStore that logs each call, and can refuse writes or fail a call."""

    def __init__(self, log: Recorder, *, refuse: set[str] = frozenset(), fail: str = "") -> None:  # type: ignore[assignment]
        self.inner = MemoryStore()
        self.log = log
        self.refuse = refuse
        self.fail = fail

    async def load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None = None,
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        self.log.events.append("load")
        if self.fail == "load":
            raise RedisConnectionError("redis went away")
        return await self.inner.load_many(request_ids, first_offsets, tables_for)

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        self.log.events.append("save")
        kept = [w for w in writes if w.request_id not in self.refuse]
        await self.inner.save_many(kept)
        return [w.request_id for w in writes if w.request_id in self.refuse]

    async def claim_epoch(self, scope: str) -> int:
        self.log.events.append(f"claim {scope}")
        return await self.inner.claim_epoch(scope)

    async def close(self) -> None:
        return None


class RecordingSink:
    def __init__(self, log: Recorder, *, too_large: int = 0) -> None:
        self.log = log
        self.too_large = too_large  # outputs over this many bytes are refused (0: none)
        self.outputs: list[OutRecord] = []

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        self.log.events.append(f"produce {len(outputs)}")
        refused = [o for o in outputs if self.too_large and len(o.value) > self.too_large]
        self.outputs += [o for o in outputs if o not in refused]
        await asyncio.sleep(0)  # an ack arrives later
        self.log.events.append("acked")
        if refused:
            raise OutputsRefused([(o, MessageSizeTooLargeError()) for o in refused])


class RecordingSource:
    def __init__(self, log: Recorder) -> None:
        self.log = log
        self.committed: dict[Partition, int] = {}

    async def poll(self) -> Batch | None:
        return None

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        which = sorted(map(str, partitions if partitions is not None else batch.first))
        self.log.events.append(f"rewind {','.join(which)}")

    async def commit(self, offsets: Mapping[Partition, int]) -> None:
        self.log.events.append(f"commit {dict(sorted(offsets.items()))}")
        self.committed.update(offsets)

    def scope(self, partition: Partition) -> str:
        return f"g/in/{partition}"


def _batch(records: list[tuple[int, dict[str, Any]]], first: int = 10) -> Batch:
    """Records as (partition, ChunkRecord), offsets counted per partition from `first`."""
    ins, firsts, lasts = [], {}, {}
    for partition, rec in records:
        offset = lasts.get(partition, first - 1) + 1
        firsts.setdefault(partition, offset)
        lasts[partition] = offset
        value = json.dumps(rec).encode()
        ins.append(InRecord(value, rec["request_id"], None, f"in/{partition}/{offset}", partition))
    return Batch(ins, firsts, lasts)


def _run(batch: Batch, store: Any, sink: Any, source: Any) -> Any:
    checkpoint = Checkpoint(source, store)
    return asyncio.run(
        run_batch(
            batch,
            registry=REGISTRY,
            sink=sink,
            checkpoint=checkpoint,
            max_record_bytes=1 << 20,
        )
    )


def test_load_then_produce_acked_then_save_then_commit() -> None:
    log = Recorder()
    batch = _batch([(0, chunk("a", 0, [100, 101])), (1, chunk("b", 0, [102])), (0, end("a", 1))])
    report = _run(batch, RecordingStore(log), RecordingSink(log), RecordingSource(log))
    assert log.events == [
        "claim g/in/0",
        "claim g/in/1",
        "load",
        f"produce {len(report.result.outputs)}",
        "acked",
        "save",
        "commit {0: 12, 1: 11}",  # last offset + 1 per partition
    ]
    # Each write carries its partition's epoch, as the checkpoint claimed them.
    assert {w.request_id: w.epoch for w in report.writes} == {"a": 1, "b": 1}


def test_a_refused_save_rewinds_its_partition_and_commits_only_the_others() -> None:
    log = Recorder()
    batch = _batch([(0, chunk("a", 0, [100])), (1, chunk("b", 0, [102]))])
    report = _run(
        batch, RecordingStore(log, refuse={"b"}), RecordingSink(log), RecordingSource(log)
    )
    assert report.refused == ["b"] and report.rewound == [1]
    assert log.events[-2:] == ["rewind 1", "commit {0: 11}"]


def test_a_transient_error_commits_nothing_and_the_runner_rewinds_the_batch() -> None:
    log = Recorder()
    batch = _batch([(0, chunk("a", 0, [100]))])
    store, source, sink = RecordingStore(log, fail="load"), RecordingSource(log), RecordingSink(log)
    runner = _runner()
    runner.sinks = [sink]
    runner.store = store
    checkpoint = Checkpoint(source, store)

    async def body() -> None:
        await runner._handle(batch, checkpoint, sink)  # type: ignore[arg-type]

    asyncio.run(body())
    assert log.events == ["claim g/in/0", "load", "rewind 0"]
    assert not any(e.startswith(("produce", "commit")) for e in log.events)


def test_an_output_the_broker_refuses_fails_its_request_and_the_partition_moves_on() -> None:
    log = Recorder()
    big = list(range(100, 400))  # one output far larger than the sink takes
    # (a completion: a chat stream's small opening chunk would go out before it)
    whole = chunk("big", 0, big, "length", api="completion")
    batch = _batch([(0, whole), (0, chunk("ok", 0, [100])), (0, end("ok", 1))])
    sink = RecordingSink(log, too_large=600)
    store = RecordingStore(log)
    report = _run(batch, store, sink, RecordingSource(log))
    assert log.events[-2:] == ["save", "commit {0: 13}"]
    errors = [o for o in sink.outputs if o.key == "big"]
    assert [o.kind for o in errors] == ["error"]
    (err,) = errors
    headers = dict(err.headers)
    assert headers[H_REQUEST_ID] == b"big" and headers[H_SEQ] == b"0" and headers[H_PART] == b"0"
    assert headers[H_KIND] == b"error"
    assert "refused by the broker" in json.loads(err.value)["error"]["message"]
    # The other request is untouched, and the failed one's later records are skipped.
    assert [o.kind for o in sink.outputs if o.key == "ok"][-1] == "done"
    assert report.result.results["ok"] >= 2
    later = _batch([(0, chunk("big", 1, [100]))], first=13)
    again = _run(later, store, RecordingSink(log), RecordingSource(log))
    assert again.result.results == {"skipped": 1}


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (KafkaConnectionError(), Kind.TRANSIENT),
        (RedisConnectionError("down"), Kind.TRANSIENT),
        (TimeoutError(), Kind.TRANSIENT),
        (MessageSizeTooLargeError(), Kind.DATA),
        (TopicAuthorizationFailedError(), Kind.CONFIG),
        (AuthenticationError("WRONGPASS"), Kind.CONFIG),
    ],
)
def test_errors_are_classified(exc: BaseException, kind: Kind) -> None:
    assert classify(exc) is kind


def test_a_configuration_error_stops_the_runner_at_once() -> None:
    runner = _runner("--outage-limit-s", "3600")
    with pytest.raises(ConfigError, match="TopicAuthorizationFailedError"):
        asyncio.run(runner.outage.failed("processing a batch", TopicAuthorizationFailedError()))


def _runner(*argv: str) -> Runner:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ={})
    return Runner(from_args(parser.parse_args(list(argv))), REGISTRY, MemoryStore())


def test_failed_requests_are_counted_by_error_code() -> None:
    """`derender_errors_total{code}`: a record of a request never opened (state_missing),
    an invalid record with a request id (invalid_record, also dead-lettered) and a good
    request (no error) in one batch."""
    bad = {"request_id": "c", "seq": 0, "type": "chunk", "generate_chunk": "not an object"}
    batch = _batch([(0, chunk("a", 0, [100])), (0, chunk("b", 3, [101])), (1, bad)])
    report = _run(batch, MemoryStore(), ListSink(), ListSource())
    assert report.result.errors == {"state_missing": 1, "invalid_record": 1}
    metrics = Metrics()
    Accounts(metrics, 60.0).batch(report)
    text = metrics.exposition().decode()
    assert 'derender_errors_total{code="state_missing"} 1.0' in text
    assert 'derender_errors_total{code="invalid_record"} 1.0' in text
    assert 'derender_errors_total{code="sequence_gap"} 0.0' in text  # exported from the start


def test_results_count_every_record_dead_letters_first() -> None:
    """`BatchResult.results`: plain counts by result, dead letters ("dlq") first, then in
    the order the results were first seen; the errors by code beside them."""
    bad = {"request_id": "c", "seq": 0, "type": "chunk", "generate_chunk": "not an object"}
    batch = _batch(
        [(0, chunk("a", 0, [100])), (0, chunk("b", 3, [101])), (1, bad), (0, chunk("a", 0, [100]))]
    )
    result = _run(batch, MemoryStore(), ListSink(), ListSource()).result
    assert list(result.results.items()) == [("dlq", 1), ("ok", 1), ("error", 1), ("duplicate", 1)]
    assert list(result.errors.items()) == [("state_missing", 1), ("invalid_record", 1)]
    clean = _run(_batch([(0, chunk("d", 0, [100]))]), MemoryStore(), ListSink(), ListSource())
    assert clean.result.results == {"ok": 1}
    assert clean.result.errors == {}


def test_an_unbounded_step_awaits_its_awaitable_itself() -> None:
    """`within`: no timeout, no wrapper (the awaitable itself); with one, `StepTimeout`."""

    async def stalls() -> None:
        await asyncio.sleep(10)

    aw = stalls()
    assert within(aw, None, "load") is aw
    aw.close()

    async def bounded_step() -> None:
        await within(stalls(), 0.01, "load")

    with pytest.raises(StepTimeout, match=r"load took longer than 0\.01s"):
        asyncio.run(bounded_step())


class RecordingObserver:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def stage(self, name: str, seconds: float) -> None:
        assert seconds >= 0
        self.calls.append(f"stage {name}")

    def round_trip(self, kind: str, count: int = 1) -> None:
        self.calls.append(f"round_trip {kind} {count}")

    def delivered(self, records: list[InRecord]) -> None:
        self.calls.append(f"delivered {len(records)}")

    def saved(self, writes: list[StateWrite], refused: int) -> None:
        self.calls.append(f"saved {len(writes)} {refused}")


def _observed(batch: Batch, observer: Any) -> Any:
    return asyncio.run(
        run_batch(
            batch,
            registry=REGISTRY,
            sink=ListSink(),
            checkpoint=Checkpoint(ListSource(), MemoryStore()),
            max_record_bytes=1 << 20,
            observer=observer,
        )
    )


def test_an_observer_hears_every_stage_and_round_trip_in_order() -> None:
    observer = RecordingObserver()
    _observed(_batch([(0, chunk("a", 0, [100])), (1, chunk("b", 0, [101]))]), observer)
    assert observer.calls == [
        "stage decode",
        "round_trip claim_epoch 1",
        "round_trip claim_epoch 1",
        "round_trip load 1",
        "stage redis_load",
        "stage core",
        "stage produce",
        "delivered 2",
        "round_trip save 1",
        "saved 2 0",
        "stage redis_save",
        "stage commit",
    ]


def test_a_silent_loop_reads_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """SILENT (serve, replay) is told nothing, so the loop times nothing for it."""

    def no_clock() -> float:
        raise AssertionError("the clock was read")

    monkeypatch.setattr("worker.batch.loop.time.perf_counter", no_clock)
    report = _observed(_batch([(0, chunk("a", 0, [100]))]), SILENT)
    assert report.result.results == {"ok": 1}
    with pytest.raises(AssertionError, match="the clock was read"):
        _observed(_batch([(0, chunk("b", 0, [100]))]), RecordingObserver())


def test_a_save_with_nothing_to_write_asks_the_store_nothing() -> None:
    log = Recorder()
    checkpoint = Checkpoint(RecordingSource(log), RecordingStore(log))
    assert asyncio.run(checkpoint.save([])) == []  # type: ignore[arg-type]
    assert log.events == []
