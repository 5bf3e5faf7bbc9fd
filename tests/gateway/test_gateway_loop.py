"""`derender-worker gateway` in the whole loop: a stand-in engine at the HTTP seam, the real
broker and Redis, a real `derender-worker run`, gateway processes, and clients reading
with the official `openai` SDK."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.conftest import GatewayProcess, Loop
from tests.gateway.stand_in import ENGINE_PREFIX, MODEL, vllm_error
from tests.integration.harness import Output, read_all
from worker.wire.inbound import ChunkRecord

pytestmark = pytest.mark.integration

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# The worker writes a request's outputs to its reply partition (else the key's).
WORKER_ROUTES_REPLIES = "reply_partition" in ChunkRecord.__struct_fields__


_clients: list[openai.OpenAI | httpx.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def sdk(g: GatewayProcess) -> openai.OpenAI:
    c = openai.OpenAI(base_url=g.url + "/v1", api_key="unused", max_retries=0, timeout=60)
    _clients.append(c)
    return c


def plain(g: GatewayProcess) -> httpx.Client:
    c = httpx.Client(base_url=g.url, timeout=30)
    _clients.append(c)
    return c


def chat(c: openai.OpenAI, text: str, stream: bool, **kw: Any) -> tuple[set[str], str, Any]:
    """The ids, the content and the last chunk (or the whole response) of one chat."""
    messages = [{"role": "user", "content": text}]
    if not stream:
        r = c.chat.completions.create(model=MODEL, messages=messages, **kw)  # type: ignore[call-overload]
        return {r.id}, r.choices[0].message.content or "", r
    ids, content, last = set(), "", None
    for chunk in c.chat.completions.create(model=MODEL, messages=messages, stream=True, **kw):  # type: ignore[call-overload]
        ids.add(chunk.id)
        content += "".join(ch.delta.content or "" for ch in chunk.choices)
        last = chunk
    return ids, content, last


def complete(c: openai.OpenAI, prompt: str, stream: bool, **kw: Any) -> tuple[set[str], str, Any]:
    if not stream:
        r = c.completions.create(model=MODEL, prompt=prompt, **kw)
        return {r.id}, r.choices[0].text, r
    ids, text, last = set(), "", None
    for chunk in c.completions.create(model=MODEL, prompt=prompt, stream=True, **kw):
        ids.add(chunk.id)
        text += "".join(ch.text for ch in chunk.choices)
        last = chunk
    return ids, text, last


def input_records(loop: Loop, until: Any, timeout_s: float = 30) -> list[Output]:
    return asyncio.run(read_all(loop.bootstrap, loop.topics["input"], until, timeout_s))


def aborts(records: list[Output]) -> list[dict[str, Any]]:
    values = [json.loads(r.value) for r in records]
    return [v for v in values if v.get("type") == "abort"]


def test_each_client_gets_its_own_answer_streamed_and_whole(loop: Loop) -> None:
    loop.start_worker()
    g = loop.start_gateway()
    c = sdk(g)
    engine = loop.engine

    def one(n: int) -> None:
        text = f"client {n} says {'héllo ' * n}"
        expected = engine.answer_text(text)
        kind = n % 4
        if kind == 0:
            ids, content, last = chat(c, text, True, stream_options={"include_usage": True})
            assert last.usage.completion_tokens == len(engine.answer_ids(text))
        elif kind == 1:
            ids, content, last = chat(c, text, False)
            assert last.choices[0].finish_reason == "stop"
        elif kind == 2:
            ids, content, last = complete(c, text, True, max_tokens=200)
        else:
            # No max_tokens: vLLM's default 16, which render drops and the gateway restores.
            ids, content, last = complete(c, text, False)
            expected = engine.tok.decode(engine.answer_ids(text)[:16])
            assert last.choices[0].finish_reason == "length"
        assert content == expected, (n, content)
        assert len(ids) == 1 and next(iter(ids)).startswith(("chatcmpl-", "cmpl-"))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(8)))
    completion_limits = [
        r["sampling_params"].get("max_tokens")
        for r in engine.generated
        if r["request_id"].startswith("cmpl-")
    ]
    assert sorted(completion_limits, key=str) == [16, 16, 200, 200]

    # The trace context of a client goes onto its records.
    ids, _, _ = chat(c, "traced", True, extra_headers={"traceparent": TRACEPARENT})
    (rid,) = ids
    records = input_records(loop, lambda rs: any(r.key == rid and b'"end"' in r.value for r in rs))
    mine = [r for r in records if r.key == rid]
    assert mine and all(r.headers.get("traceparent") == TRACEPARENT for r in mine)
    first = json.loads(mine[0].value)
    assert first["seq"] == 0 and first["api"] == "chat" and first["model"] == MODEL
    assert first["chat_request"]["messages"][0]["content"] == "traced"
    assert first["prompt_token_ids"] == engine.generated[-1]["token_ids"]
    assert first["reply_partition"] in range(4)
    assert [json.loads(r.value)["seq"] for r in mine] == list(range(len(mine)))

    http = plain(g)
    models = http.get("/v1/models")
    assert models.status_code == 200 and models.json()["data"][0]["id"] == MODEL
    assert http.get("/health").status_code == 200
    metrics = http.get("/metrics").text
    assert 'derender_gateway_requests_total{api="chat",outcome="ok"} 5.0' in metrics
    assert 'derender_gateway_requests_total{api="completion",outcome="ok"} 4.0' in metrics
    assert "derender_gateway_reply_wait_seconds_count 9.0" in metrics


def test_two_replicas_answer_only_their_own_clients_from_their_own_partitions(
    loop: Loop,
) -> None:
    loop.start_worker()
    owners = {"a": (loop.start_gateway("--reply-partitions", "0-1"), {0, 1})}
    owners["b"] = (loop.start_gateway("--reply-partitions", "2,3"), {2, 3})
    served: dict[str, str] = {}

    def one(n: int) -> None:
        name = "ab"[n % 2]
        text = f"replica {name} client {n}"
        ids, content, _ = chat(sdk(owners[name][0]), text, n % 3 != 0)
        assert content == loop.engine.answer_text(text)
        served[next(iter(ids))] = name

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(12)))
    records = input_records(loop, lambda rs: sum(b'"seq":0' in r.value for r in rs) >= 12)
    firsts = {r.key: json.loads(r.value) for r in records if json.loads(r.value)["seq"] == 0}
    assert set(firsts) == set(served)
    for rid, name in served.items():
        assert firsts[rid]["reply_partition"] in owners[name][1]
    # Round-robin over a replica's partitions.
    assert {firsts[rid]["reply_partition"] for rid, name in served.items() if name == "a"} == {0, 1}
    if WORKER_ROUTES_REPLIES:
        outputs = asyncio.run(
            read_all(loop.bootstrap, loop.topics["output"], lambda os: len(os) > 0, 10)
        )
        for o in outputs:
            assert o.partition == firsts[o.key]["reply_partition"], o.key


def test_a_render_refusal_reaches_the_client_unchanged(loop: Loop) -> None:
    g = loop.start_gateway()
    http = plain(g)
    missing = http.post("/v1/chat/completions", json={"model": MODEL})
    assert missing.status_code == 400
    assert missing.content == vllm_error("messages: Field required").body
    unknown = {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}
    answer = http.post("/v1/chat/completions", json=unknown)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == 404
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        sdk(g).chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    nowhere = http.get("/v1/nowhere")
    assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == 404
    assert http.get("/v1/chat/completions").status_code == 405
    two = http.post("/v1/completions", json={"model": MODEL, "prompt": ["a", "b"]})
    assert two.status_code == 400 and "one prompt" in two.json()["error"]["message"]
    assert not loop.engine.generated  # (nothing was generated, nothing published)


@pytest.mark.parametrize("mode", ["drop", "error"])
def test_an_engine_that_breaks_off_aborts_the_request_and_fails_the_client(
    loop: Loop, mode: str
) -> None:
    loop.start_worker()
    g = loop.start_gateway()
    text = f"{mode} in the middle of the answer"
    seen: list[str] = []
    with pytest.raises(openai.APIError) as failure:
        for chunk in sdk(g).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": text}], stream=True
        ):
            seen += [ch.delta.content or "" for ch in chunk.choices]
    # Every output before the break reached the client, then the error.
    assert loop.engine.answer_text(text).startswith("".join(seen))
    records = input_records(loop, lambda rs: bool(aborts(rs)))
    (abort,) = aborts(records)
    expected = "stand-in engine failed" if mode == "error" else "the generate stream"
    assert expected in abort["reason"]
    assert expected in str(failure.value)
    assert abort["seq"] == max(
        json.loads(r.value)["seq"] for r in records if r.key == abort["request_id"]
    )


def test_a_client_that_leaves_stops_the_engine_and_closes_the_request(loop: Loop) -> None:
    loop.start_worker()
    g = loop.start_gateway()
    ids = set()
    with sdk(g).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "slow story"}], stream=True
    ) as stream:
        for n, chunk in enumerate(stream):
            ids.add(chunk.id)
            if n == 3:
                break
    (rid,) = ids
    records = input_records(loop, lambda rs: bool(aborts(rs)))
    (abort,) = aborts(records)
    assert abort["request_id"] == rid and abort["reason"] == "client disconnected"
    assert ENGINE_PREFIX + rid in loop.engine.aborted
    # The engine stopped early: far fewer records than the answer's events.
    assert len([r for r in records if r.key == rid]) < len(loop.engine.answer_ids("slow")) // 3


def test_no_output_within_the_reply_timeout_is_an_error_and_aborts_the_engine(
    loop: Loop,
) -> None:
    g = loop.start_gateway("--reply-timeout-s", "1.5")  # (no worker: nothing answers)
    c = sdk(g)
    with pytest.raises(openai.APIStatusError) as failure:
        chat(c, "slow answer nobody derenders", True)
    assert failure.value.status_code == 504
    assert "--reply-timeout-s" in failure.value.message
    rid = failure.value.response.headers["x-request-id"]
    records = input_records(loop, lambda rs: bool(aborts(rs)))
    (abort,) = aborts(records)
    assert abort["request_id"] == rid and abort["reason"] == "reply timeout"
    assert ENGINE_PREFIX + rid in loop.engine.aborted
    assert f"{rid}: no output from the worker for 1.5 s" in g.log_text()
    assert re.search(rf"{rid}: .*; nothing answered of [1-9]\d* records published", g.log_text())
    with pytest.raises(openai.APIStatusError) as whole:
        chat(c, "a whole answer nobody derenders", False)
    assert whole.value.status_code == 504


def test_a_worker_that_stalls_mid_stream_ends_the_stream_with_an_error(loop: Loop) -> None:
    worker = loop.start_worker()
    g = loop.start_gateway("--reply-timeout-s", "2")
    seen = 0
    try:
        with pytest.raises(openai.APIError, match="reply-timeout-s") as failure:
            for _ in sdk(g).chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "slow stall"}], stream=True
            ):
                seen += 1
                if seen == 2:
                    worker.signal(signal.SIGSTOP)  # (the fleet stops answering)
    finally:
        worker.signal(signal.SIGCONT)
    assert seen >= 2 and not isinstance(failure.value, openai.APIStatusError)
    records = input_records(loop, lambda rs: bool(aborts(rs)))
    (abort,) = aborts(records)
    assert abort["reason"] == "reply timeout"
    assert ENGINE_PREFIX + abort["request_id"] in loop.engine.aborted
    # The log says how far the worker got: it had answered what the client saw.
    said = re.search(
        rf"{abort['request_id']}: .*; answered up to seq (\d+) of (\d+) records published",
        g.log_text(),
    )
    assert said is not None, g.log_text()[-2000:]
    assert 0 <= int(said[1]) < int(said[2])


def test_the_api_key_guards_the_v1_paths(loop: Loop) -> None:
    g = loop.start_gateway("--api-key", "s3cret")
    http = plain(g)
    refused = http.get("/v1/models")
    assert refused.status_code == 401 and refused.json() == {"error": "Unauthorized"}
    assert http.get("/v1/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert http.get("/health").status_code == 200
    assert "s3cret" not in g.log_text()


def test_a_server_span_per_request_parents_its_records(loop: Loop) -> None:
    from tests.support.otlp_receiver import otel_env, otlp_receiver

    loop.start_worker()
    trace_id, client_span = TRACEPARENT.split("-")[1:3]
    with otlp_receiver() as receiver:
        g = loop.start_gateway(env=otel_env(receiver, "derender-gateway-test"))
        ids, _, _ = chat(sdk(g), "traced", True, extra_headers={"traceparent": TRACEPARENT})
        (rid,) = ids
        assert g.stop() == 0, g.log_text()  # (its spans are flushed at exit)
        spans = receiver.wait_for(lambda ss: any(s.kind == "SERVER" for s in ss))
    (server,) = [s for s in spans if s.kind == "SERVER"]
    assert (server.trace_id, server.parent_span_id) == (trace_id, client_span)
    assert server.name.startswith("POST") and server.service == "derender-gateway-test"
    assert server.attributes["url.path"] == "/v1/chat/completions"
    records = input_records(loop, lambda rs: any(r.key == rid and b'"end"' in r.value for r in rs))
    parents = {r.headers.get("traceparent") for r in records if r.key == rid}
    assert parents == {f"00-{trace_id}-{server.span_id}-01"}


def test_a_gateway_stopped_mid_stream_closes_its_requests(loop: Loop) -> None:
    loop.start_worker()
    g = loop.start_gateway()
    ids: set[str] = set()
    with pytest.raises(openai.APIConnectionError):  # (the stream breaks inside)
        for chunk in sdk(g).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hold goodbye"}], stream=True
        ):
            ids.add(chunk.id)
            if len(ids) == 1 and g.proc is not None and g.proc.poll() is None:
                g.proc.terminate()  # (SIGTERM: in-flight requests get the grace period)
    assert g.proc is not None and g.proc.wait(timeout=30) == 0, g.log_text()
    (rid,) = ids
    records = input_records(loop, lambda rs: bool(aborts(rs)))
    assert [(a["request_id"], a["reason"]) for a in aborts(records)] == [
        (rid, "gateway stopped")
    ], g.log_text()
    assert ENGINE_PREFIX + rid in loop.engine.aborted, g.log_text()
