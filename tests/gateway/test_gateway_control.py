"""The gateway on the control topic: a stop string the worker applies (the stand-in engine
ignores `stop`, as a tokens-only engine does) stops the engine's generation at once, and
the request still ends with its `end` record."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from tests.gateway.conftest import GatewayProcess, Loop
from tests.gateway.stand_in import ENGINE_PREFIX, MODEL, SLOW_ANSWER
from tests.gateway.test_gateway_loop import aborts, input_records

pytestmark = pytest.mark.integration

STOP = "tock"


def stopped_chat(g: GatewayProcess, text: str) -> tuple[str, str, str | None]:
    """The id, content and finish reason of a streamed chat with the stop string."""
    with openai.OpenAI(base_url=g.url + "/v1", api_key="-", max_retries=0, timeout=60) as c:
        ids, content, finish = set(), "", None
        for chunk in c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": text}],
            stream=True,
            stop=[STOP],
        ):
            ids.add(chunk.id)
            content += "".join(ch.delta.content or "" for ch in chunk.choices)
            finish = next((ch.finish_reason for ch in chunk.choices if ch.finish_reason), finish)
    (rid,) = ids
    return rid, content, finish


def test_a_worker_stop_stops_the_engine_and_the_request_still_ends(loop: Loop) -> None:
    loop.start_worker("--control-topic", loop.topics["control"])
    on = loop.start_gateway("--control-topic", loop.topics["control"])
    off = loop.start_gateway()  # (without the flag: the engine runs to the end)
    with ThreadPoolExecutor(2) as pool:
        stopped = pool.submit(stopped_chat, on, "slow story, stopped")
        unstopped = pool.submit(stopped_chat, off, "slow story, not stopped")
        answers = {"on": stopped.result(), "off": unstopped.result()}
    whole = len(loop.engine.answer_ids("slow"))
    generated = {}
    for name, (rid, content, finish) in answers.items():
        # The client's answer ends at the stop, either way.
        assert content == SLOW_ANSWER.split(STOP)[0] and finish == "stop", name
        records = input_records(
            loop, lambda rs, rid=rid: any(r.key == rid and b'"end"' in r.value for r in rs)
        )
        mine = [json.loads(r.value) for r in records if r.key == rid]
        assert mine[-1]["type"] == "end" and not aborts(records), name
        assert [v["seq"] for v in mine] == list(range(len(mine)))
        generated[name] = loop.engine.tokens[ENGINE_PREFIX + answers[name][0]]
    rid_on, rid_off = answers["on"][0], answers["off"][0]
    assert ENGINE_PREFIX + rid_on in loop.engine.aborted
    assert ENGINE_PREFIX + rid_off not in loop.engine.aborted
    # The stop fires in the first events: with the control topic the engine stopped a
    # few events later; without it, it generated the whole answer.
    assert generated["off"] == whole
    assert generated["on"] < whole // 10, generated
    print(f"tokens generated: with control {generated['on']}, without {generated['off']}")
    metrics = httpx.get(on.url + "/metrics").text
    assert 'derender_gateway_control_stops_total{reason="stop"} 1.0' in metrics
    assert 'derender_gateway_requests_total{api="chat",outcome="ok"} 1.0' in metrics
    (late,) = [
        float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("derender_gateway_control_late_tokens_total ")
    ]
    assert 0 <= late < generated["on"]
