"""Redis goes away under a running worker: it backs off, commits nothing it could not save,
and resumes (or, past the outage limit, exits non-zero for its supervisor to restart it).

The test redis-server has no persistence, so a restart loses every state: a request in
flight across it gets `state_missing` at its first record after the restart
(docs/integrate/contract.md, "Errors": seq > 0 and no state), then nothing but `[DONE]` at
its end. Never different text. With persistence (append-only file, fsync always) a restart
loses nothing, and a batch whose save failed is redone with the same bytes.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.chaos.tools import (
    FIXED_TS_MS,
    Tail,
    chaos_env,
    describe,
    group_offsets,
    oracle,
    per_request,
    process_state,
    wait_exit,
    wait_log,
    wait_until,
)
from tests.integration.harness import (
    Generation,
    WorkerProcess,
    choice_text,
    interleave,
    make_generations,
    publish,
    verify,
)
from tests.support.servers import RedisServer, ServerError
from worker.core.errors import STATE_MISSING

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

# How long Redis stays down in the restart test: several backoff rounds.
DOWN_S = 3.0


class DurableRedis(RedisServer):
    """redis-server with an append-only file synced on every write: a restart keeps it all."""

    def argv(self) -> list[str]:
        argv = super().argv()
        argv[argv.index("--appendonly") + 1] = "yes"
        return [*argv, "--appendfsync", "always"]


@pytest.fixture
def durable_redis() -> Iterator[DurableRedis]:
    try:
        server = DurableRedis()
    except ServerError as e:
        pytest.skip(str(e))
    with server:
        yield server


class Input:
    """The input topic, and the offset after the last record published per partition."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.ends = dict.fromkeys(range(4), 0)

    def send(self, records: list[dict[str, Any]]) -> None:
        ends = asyncio.run(publish(self.bootstrap, self.topic, list(records), FIXED_TS_MS))
        for p, end in ends.items():
            self.ends[p] = max(self.ends[p], end)

    def committed(self, w: WorkerProcess) -> dict[int, int]:
        return group_offsets(self.bootstrap, w.group_id, self.topic, 4)

    def all_committed(self, w: WorkerProcess) -> bool:
        return self.committed(w) == self.ends


def test_redis_restart_mid_run(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    restartable_redis: RedisServer,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    early = make_generations(deepseek, 30, seed=401, prefix="early")
    # In flight across the restart: the first part before, the rest (at least one chunk
    # and the end) after.
    inflight = make_generations(deepseek, 40, seed=402, prefix="inflight")
    inflight = [g for g in inflight if len(g.records) >= 3][:30]
    cut = {g.request_id: (len(g.records) - 1) // 2 for g in inflight}
    heads = [Generation(g.request_id, g.ids, "", g.records[: cut[g.request_id]]) for g in inflight]
    rests = [Generation(g.request_id, g.ids, "", g.records[cut[g.request_id] :]) for g in inflight]
    fresh = make_generations(deepseek, 30, seed=403, prefix="fresh")

    source = Input(kafka_bootstrap, topics["input"])
    w = worker_factory(redis=restartable_redis.url)
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        source.send(interleave(early + heads, seed=404))
        tail.wait_done([g.request_id for g in early])
        # Everything so far is processed, saved and committed.
        wait_until(lambda: source.all_committed(w), 60, "the first part to be committed")
        committed = source.committed(w)

        restartable_redis.stop()
        source.send(interleave(rests + fresh, seed=405))
        wait_log(w, "processing a batch failed, retrying", 30)
        time.sleep(DOWN_S)  # the outage itself
        assert w.alive, w.log_tail()
        # Nothing was committed that could not be saved.
        assert source.committed(w) == committed
        restartable_redis.start()

        wait_log(w, "recovered after", 60)
        outputs = tail.wait_done([g.request_id for g in inflight + fresh])
        wait_until(lambda: source.all_committed(w), 60, "everything to be committed")
    # Requests that finished before, and requests that started after: exact.
    verify(outputs, early + fresh)
    # Requests in flight: exactly their outputs up to the restart, then state_missing at
    # the first record after it, then [DONE] at their end.
    got = per_request(outputs)
    before = per_request(oracle([r for g in heads for r in g.records]).outputs)
    for g in inflight:
        rid, k, last = g.request_id, cut[g.request_id], len(g.records) - 1
        assert got[rid][: len(before[rid])] == before[rid], rid
        assert describe(got[rid][len(before[rid]) :]) == [(k, 0, STATE_MISSING), (last, 0, "done")]
        text = "".join(
            choice_text(c)
            for _, _, kind, v in before[rid]
            if kind == "chunk"
            for c in json.loads(v)["choices"]
        )
        assert g.expected.startswith(text), rid
    assert w.stop() == 0, w.log_tail()


def test_outage_past_the_limit_exits_non_zero(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    restartable_redis: RedisServer,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    first = make_generations(deepseek, 5, seed=411, prefix="first")
    second = make_generations(deepseek, 5, seed=412, prefix="second")
    source = Input(kafka_bootstrap, topics["input"])
    w = worker_factory("--outage-limit-s", "3", redis=restartable_redis.url)
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        source.send(interleave(first, seed=413))
        tail.wait_done([g.request_id for g in first])
        wait_until(lambda: source.all_committed(w), 60, "the first part to be committed")
        committed = source.committed(w)

        restartable_redis.stop()
        source.send(interleave(second, seed=414))
        assert wait_exit(w, 60) == 1, w.log_tail()
        log = w.log_text()
        assert "processing a batch failed, retrying: ConnectionError" in log
        assert "giving up: processing a batch kept failing for" in log
        assert "(limit 3s); last error: ConnectionError" in log
        assert source.committed(w) == committed

        # The supervisor's restart, once Redis is back, picks up where it stopped.
        restartable_redis.start()
        again = worker_factory(redis=restartable_redis.url)
        outputs = tail.wait_done([g.request_id for g in first + second])
    verify(outputs, first + second)
    assert again.stop() == 0, again.log_tail()


def test_save_fails_after_produce_and_the_batch_is_redone(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    durable_redis: DurableRedis,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    early = make_generations(deepseek, 20, seed=421, prefix="early")
    mids = [
        g for g in make_generations(deepseek, 30, seed=422, prefix="mid") if len(g.records) >= 3
    ]
    heads = [Generation(g.request_id, [], "", g.records[:1]) for g in mids]
    rests = [Generation(g.request_id, [], "", g.records[1:]) for g in mids]
    source = Input(kafka_bootstrap, topics["input"])
    # The worker freezes itself after producing the first batch that writes a mid-* request,
    # before saving it; Redis goes down meanwhile, so that save fails when it goes on.
    w = worker_factory(redis=durable_redis.url, **chaos_env(stop_before_save="mid-"))
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        source.send(interleave(early, seed=423))
        tail.wait_done([g.request_id for g in early])
        wait_until(lambda: source.all_committed(w), 60, "the first part to be committed")
        committed = source.committed(w)
        source.send(interleave(heads, seed=424))
        assert w.proc is not None
        wait_until(lambda: process_state(w.proc.pid) == "T", 60, "the worker to freeze")
        durable_redis.stop()
        source.send(interleave(rests, seed=425))
        w.signal(signal.SIGCONT)
        wait_log(w, "processing a batch failed, retrying", 30)
        assert source.committed(w) == committed  # the unsaved batch is not committed
        durable_redis.start()
        wait_log(w, "recovered after", 60)
        outputs = tail.wait_done([g.request_id for g in mids])
        wait_until(lambda: source.all_committed(w), 60, "everything to be committed")
    # Redis kept every state, so every request is exact; the batch whose save failed was
    # published twice, the same bytes both times.
    verdict = verify(outputs, early + mids)
    assert verdict.repeats > 0
    assert w.stop() == 0, w.log_tail()
