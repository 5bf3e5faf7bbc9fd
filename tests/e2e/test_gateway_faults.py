"""Cancellation and faults on the real engine, through `derender-worker gateway`.

Each case checks the engine's own view (its /metrics: requests running, tokens
generated), the records on the topics (read from the topics themselves) and what the
client gets, against what docs/integrate/gateway.md promises:

- a client that disconnects mid-stream: the engine stops generating, an `abort` record
  closes the request and the worker ends it on the output topic;
- the worker fleet stopped: the client gets an error within `--reply-timeout-s` and the
  engine request is aborted;
- a gateway killed (SIGKILL) mid-stream: its client's connection drops, the engine stops,
  the other replica keeps serving, and no record the killed one published is lost;
- the engine killed mid-stream (the session's last test: the engine is gone after it):
  the client gets an error and the worker sees `abort`.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx2
import openai
import pytest

from tests.e2e.engine import SERVED_MODEL
from tests.e2e.gateways import (
    NOTES,
    Gateway,
    Rec,
    TopicWatch,
    engine_metrics,
    wait_engine_idle,
)
from tests.e2e.test_engine_oracle import CASES, MESSAGES, check
from tests.e2e.test_gateway_oracle import assert_on_its_partitions, ended

if TYPE_CHECKING:
    from tests.e2e.engine import Engine
    from tests.integration.harness import WorkerProcess

# (540 s: the first test to run may start the engine, as in test_engine_oracle.py)
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(540)]

# Long enough that an engine that does not stop is still generating when looked at
# (~70 tokens a second here: about 20 s).
LONG = 1500
REPLY_TIMEOUT_S = 3.0
# What a client that loses its gateway or engine sees mid-stream.
BROKEN = (openai.APIError, httpx2.HTTPError)


def long_stream(client: openai.OpenAI) -> Any:
    # (ignore_eos: the random model would end the answer by itself after a few dozen tokens)
    return client.chat.completions.create(
        model=SERVED_MODEL,
        messages=MESSAGES,
        max_tokens=LONG,
        temperature=0,
        stream=True,
        extra_body={"ignore_eos": True},
    )


def aborts(recs: list[Rec]) -> list[dict[str, Any]]:
    return [v for v in (r.json() for r in recs) if v and v.get("type") == "abort"]


def assert_ended_by_abort(watch: TopicWatch, rid: str, reason: str) -> None:
    """The request's last input record is an `abort` whose reason contains `reason`, and
    the worker ended the request on the output topic (`finish_reason: "abort"`, `done`)."""
    inputs = watch.wait(rid, lambda rs: bool(aborts(rs)), watch.topics[0])
    (abort,) = aborts(inputs)
    assert reason in abort["reason"], abort
    assert abort["seq"] == max(r.json()["seq"] for r in inputs), abort
    outputs = watch.wait(rid, ended(True), watch.topics[1])
    tail = [(o.headers["derender-seq"], o.value[-160:]) for o in outputs[-3:]]
    assert any(b'"finish_reason":"abort"' in o.value for o in outputs), tail


def assert_contiguous(recs: list[Rec]) -> list[int]:
    """Every record a gateway published for a request: seq 0, 1, 2, … with no gap."""
    seqs = sorted({r.json()["seq"] for r in recs})
    assert seqs == list(range(len(seqs))), seqs
    return seqs


@pytest.fixture(scope="module")
def oracle(engine_url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="e2e", base_url=f"{engine_url}/v1", max_retries=0, timeout=60)


@pytest.fixture
def engine_idle(engine_url: str) -> Iterator[Callable[[], Any]]:
    """The engine runs nothing before the test; the function waits until it runs nothing
    again and returns the tokens it generated in between."""
    start = wait_engine_idle(engine_url, 30)

    def generated_since() -> float:
        return wait_engine_idle(engine_url).generated - start.generated

    generated_since.start = start  # type: ignore[attr-defined]
    yield generated_since


def test_a_client_that_disconnects_stops_the_engine_and_closes_the_request(
    gateways: dict[str, Gateway],
    engine_url: str,
    topic_watch: TopicWatch,
    engine_idle: Callable[[], float],
) -> None:
    g = gateways["a"]
    before = len(g.served)
    with long_stream(g.client()) as stream:
        for n, _ in enumerate(stream):
            if n == 3:
                at_close = engine_metrics(engine_url)
                assert at_close.running == 1
                break
    closed = time.monotonic()
    (rid,) = g.served[before:]
    total = engine_idle()  # bounded: the engine stops within seconds
    took = time.monotonic() - closed
    after = total - (at_close.generated - (engine_idle.start.generated))  # type: ignore[attr-defined]
    NOTES.append(
        (
            "client disconnected",
            f"the engine stopped {took:.1f} s after, {after:.0f} tokens later "
            f"({total:.0f} of {LONG} in all)",
        )
    )
    assert took < 3, took
    assert_ended_by_abort(topic_watch, rid, "client disconnected")
    assert (
        g.settled_metric(
            "derender_gateway_requests_total", lambda v: v >= 1, outcome="disconnected"
        )
        >= 1
    )


@pytest.fixture(scope="module")
def impatient(start_gateway: Callable[..., Gateway], e2e_worker: WorkerProcess) -> Gateway:
    return start_gateway("impatient", (0, 1), "--reply-timeout-s", str(REPLY_TIMEOUT_S))


@pytest.fixture
def stopped_fleet(e2e_worker: WorkerProcess) -> Iterator[Callable[[], None]]:
    """`stop()` freezes the worker fleet (SIGSTOP); it runs again after the test."""
    stopped = []

    def stop() -> None:
        e2e_worker.signal(signal.SIGSTOP)
        stopped.append(time.monotonic())

    try:
        yield stop
    finally:
        if stopped:
            e2e_worker.signal(signal.SIGCONT)


def test_a_stopped_worker_fleet_fails_the_stream_within_the_reply_timeout(
    impatient: Gateway,
    stopped_fleet: Callable[[], None],
    topic_watch: TopicWatch,
    engine_idle: Callable[[], float],
) -> None:
    before = len(impatient.served)
    seen, t0 = 0, 0.0
    with pytest.raises(openai.APIError, match="reply-timeout-s") as failure:
        for _ in long_stream(impatient.client()):
            seen += 1
            if seen == 2:
                stopped_fleet()
                t0 = time.monotonic()
    errored = time.monotonic()
    waited = errored - t0
    (rid,) = impatient.served[before:]
    assert not isinstance(failure.value, openai.APIStatusError)  # (an event in the stream)
    # (The gateway's own line says how far the worker got; the engine log, whether the
    # machine was starved: see engine.py on the engine's session.)
    said = [line for line in impatient.process.log_text().splitlines() if rid in line]
    assert REPLY_TIMEOUT_S / 2 < waited < REPLY_TIMEOUT_S + 5, (waited, said)
    # The engine request was aborted: the engine stopped soon after the client's error,
    # short of the whole answer. (How many tokens it made by then is its decode speed
    # times the reply timeout: about 1,000 on an idle machine, 130 on a loaded one.)
    generated = engine_idle()
    took = time.monotonic() - errored
    assert took < 3 and generated < LONG, (took, generated)
    NOTES.append(
        (
            "worker fleet stopped",
            f"the client's error {waited:.1f} s after (--reply-timeout-s {REPLY_TIMEOUT_S:g}), "
            f"the engine stopped {took:.1f} s later, after {generated:.0f} of {LONG} tokens",
        )
    )
    inputs = topic_watch.wait(rid, lambda rs: bool(aborts(rs)), topic_watch.topics[0])
    assert aborts(inputs)[0]["reason"] == "reply timeout"


def test_a_stopped_worker_fleet_fails_a_whole_answer_within_the_reply_timeout(
    impatient: Gateway, stopped_fleet: Callable[[], None], engine_idle: Callable[[], float]
) -> None:
    """(The engine has finished a whole answer's generation when the wait begins: its one
    `response` record is all the request has, and no `abort` follows.)"""
    stopped_fleet()
    t0 = time.monotonic()
    with pytest.raises(openai.APIStatusError) as failure:
        impatient.client().chat.completions.create(
            model=SERVED_MODEL, messages=MESSAGES, max_tokens=20, temperature=0
        )
    waited = time.monotonic() - t0
    assert failure.value.status_code == 504 and "--reply-timeout-s" in failure.value.message
    assert REPLY_TIMEOUT_S < waited < REPLY_TIMEOUT_S + 5, waited
    assert failure.value.response.headers["x-request-id"] in impatient.served
    assert engine_idle() <= 20


def test_the_worker_fleet_back_ends_the_requests_it_missed(
    gateways: dict[str, Gateway],
    impatient: Gateway,
    topic_watch: TopicWatch,
    oracle: openai.OpenAI,
) -> None:
    """After the fleet runs again it catches up: the requests that timed out end on the
    output topic, and the gateways answer again."""
    if not impatient.served:
        pytest.skip("no request timed out in this session")
    for rid in impatient.served:
        topic_watch.wait(rid, lambda rs: any(r.kind in ("done", "response") for r in rs))
    g = gateways["b"]
    before = len(g.served)
    check(CASES[0], True, g.client(), oracle)
    (rid,) = g.served[before:]
    assert_on_its_partitions(topic_watch, rid, g, True)


def test_a_gateway_killed_mid_stream_loses_its_connections_not_records(
    start_gateway: Callable[..., Gateway],
    gateways: dict[str, Gateway],
    topic_watch: TopicWatch,
    oracle: openai.OpenAI,
    engine_idle: Callable[[], float],
) -> None:
    doomed = start_gateway("killed", (1,))
    before = len(doomed.served)
    seen = 0
    with pytest.raises(BROKEN):
        for _ in long_stream(doomed.client()):
            seen += 1
            if seen == 3:
                assert doomed.process.proc is not None
                doomed.process.proc.send_signal(signal.SIGKILL)
    (rid,) = doomed.served[before:]
    # Its engine request's connection closed with it: the engine stops.
    generated = engine_idle()
    assert generated < LONG // 4, generated
    NOTES.append(("gateway killed", f"the engine stopped after {generated:.0f} of {LONG} tokens"))
    # What it published is all there, in order, and the worker answered on its partition.
    # (`seen` chunks reached the client: the worker's outputs of at least one record)
    inputs = topic_watch.records(rid, topic_watch.topics[0])
    assert len(assert_contiguous(inputs)) >= 1
    outputs = topic_watch.wait(rid, lambda rs: len(rs) >= seen, topic_watch.topics[1])
    assert {o.partition for o in outputs} == {1}
    # The other replica keeps serving.
    g = gateways["b"]
    before = len(g.served)
    check(CASES[0], True, g.client(), oracle)
    (answered,) = g.served[before:]
    assert_on_its_partitions(topic_watch, answered, g, True)


def test_an_engine_killed_mid_stream_fails_the_client_and_aborts_the_request(
    engine: Engine | str, gateways: dict[str, Gateway], topic_watch: TopicWatch
) -> None:
    if isinstance(engine, str):
        pytest.skip("the engine is not this session's to kill (DERENDER_E2E_ENGINE_URL)")
    g = gateways["a"]
    before = len(g.served)
    seen = 0
    t0 = 0.0
    with pytest.raises(openai.APIError) as failure:
        for _ in long_stream(g.client()):
            seen += 1
            if seen == 3:
                os.killpg(engine.proc.pid, signal.SIGKILL)
                t0 = time.monotonic()
    waited = time.monotonic() - t0
    assert waited < 30, waited
    NOTES.append(("engine killed", f"the client's error {waited:.1f} s after"))
    assert not isinstance(failure.value, openai.APIStatusError)  # (an event in the stream)
    assert "broke" in failure.value.message, failure.value.message
    (rid,) = g.served[before:]
    assert_ended_by_abort(topic_watch, rid, "the generate stream")
    assert (
        g.settled_metric(
            "derender_gateway_requests_total", lambda v: v >= 1, outcome="engine_failed"
        )
        >= 1
    )
