"""Every oracle case through two `derender-worker gateway` replicas, in turn.

The same cases as test_engine_oracle.py, but the client is the official `openai` SDK on a
gateway's URL: render → generate → the input topic → the worker → the replica's reply
partitions → the client, compared with vLLM's coupled server on the same engine. Each
answer's outputs must be on the output topic only in the partitions of the replica that
served it (read from the topic itself, every partition). The gateway keeps the client's
`stop` in the generate request, so the engine applies stop strings here.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import openai
import pytest

from tests.e2e.differences import TALLY
from tests.e2e.engine import SERVED_MODEL
from tests.e2e.gateways import Gateway, Rec, TopicWatch
from tests.e2e.loop import Options
from tests.e2e.oracle import read_error
from tests.e2e.test_engine_oracle import CASES, ERRORS, MESSAGES, Case, check

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(540)]

_turn = itertools.count()


def next_gateway(gateways: dict[str, Gateway]) -> Gateway:
    names = sorted(gateways)
    return gateways[names[next(_turn) % len(names)]]


def ended(stream: bool) -> Any:
    """The request's last output is on the output topic."""
    last = ("done",) if stream else ("response", "error")
    return lambda recs: any(r.kind in last for r in recs)


def assert_on_its_partitions(watch: TopicWatch, rid: str, g: Gateway, stream: bool) -> None:
    outputs = watch.wait(rid, ended(stream), watch.topics[1])
    (first,) = [r.json() for r in watch.records(rid, watch.topics[0]) if r.json()["seq"] == 0]
    assert first["reply_partition"] in g.partitions, first
    assert {o.partition for o in outputs} == {first["reply_partition"]}, _where(outputs)


def _where(recs: list[Rec]) -> list[tuple[int, str]]:
    return [(r.partition, r.kind) for r in recs]


@pytest.fixture(scope="module")
def oracle(engine_url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="e2e", base_url=f"{engine_url}/v1", max_retries=0, timeout=60)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_gateways_answer_as_vllms_coupled_server(
    case: Case,
    stream: bool,
    gateways: dict[str, Gateway],
    oracle: openai.OpenAI,
    topic_watch: TopicWatch,
) -> None:
    g = next_gateway(gateways)
    before = len(g.served)
    # The gateway sends the client's stop to the engine (no worker-alone stop here) and
    # streams every generate call.
    via = dataclasses.replace(case, options=Options(whole_from_stream=True))
    check(via, stream, g.client(), oracle)
    TALLY["through the gateways"] += 1
    (rid,) = g.served[before:]
    assert_on_its_partitions(topic_watch, rid, g, stream)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("params", ERRORS.values(), ids=list(ERRORS))
def test_the_engines_refusal_reaches_the_gateways_client_unchanged(
    params: dict[str, Any],
    stream: bool,
    gateways: dict[str, Gateway],
    oracle: openai.OpenAI,
    topic_watch: TopicWatch,
) -> None:
    g = next_gateway(gateways)
    body = {"model": SERVED_MODEL, "temperature": 0, "messages": MESSAGES, **params}
    before = len(g.served)
    theirs = read_error("chat", oracle, body, stream)
    ours = read_error("chat", g.client(), body, stream)
    assert theirs[1]["code"] == 400, theirs
    assert ours == theirs
    for rid in g.served[before:]:
        assert not topic_watch.records(rid), rid  # nothing reached the topics


def test_each_replica_counted_its_own_answers(gateways: dict[str, Gateway]) -> None:
    """The gateways' own view: every answer of the oracle cases counted as `ok` by the
    replica that served it, none timed out or failed."""
    served = {
        name: g.metric("derender_gateway_requests_total", outcome="ok")
        for name, g in gateways.items()
    }
    if not any(served.values()):
        pytest.skip("no oracle case ran through the gateways in this session")
    for g in gateways.values():
        assert g.metric("derender_gateway_requests_total", outcome="timeout") == 0
        assert g.metric("derender_gateway_requests_total", outcome="engine_failed") == 0
        assert g.settled_metric("derender_gateway_requests_in_flight", lambda v: v == 0) == 0
    assert all(served.values()), served
