"""`derender-worker demo --engine-url URL`: the demo's questions through a real vLLM engine.

The same broker, redis-server and worker as the recorded demo (demo.py), and a gateway in
this process (worker/gateway/) in front of the engine: each question is a streamed chat
request to the gateway, which renders and generates it on the engine, publishes the
generate events, and streams back the worker's outputs. The first request is shown live,
then every transcript and a summary (time to first token through the whole loop).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any

import httpx

from worker.config import load_registry
from worker.constants import CONTROL_TOPIC, INPUT_TOPIC, OUTPUT_TOPIC
from worker.errors import ConfigError
from worker.tools.demo import (
    CONVERSATION,
    TOOLS,
    _percentile,
    _print_live,
    run_main,
    running_system,
)
from worker.tools.tail import Transcript

# Greedy and short: a CPU engine answers every question in seconds.
MAX_TOKENS = 48
START_TIMEOUT_S = 60.0


@dataclass
class Answer:
    name: str
    transcript: Transcript = field(default_factory=Transcript)
    first_token_s: float | None = None
    completion_tokens: int = 0


def engine_model(engine_url: str) -> str:
    """The model the engine serves (its /v1/models' first), or a one-line error."""
    try:
        r = httpx.get(engine_url.rstrip("/") + "/v1/models", timeout=10)
        r.raise_for_status()
        return str(r.json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        raise ConfigError(f"--engine-url {engine_url}: no model list ({exc})") from None


def chat_body(model: str, name: str, question: str, tools: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
    }
    if tools:
        body.update(tools=TOOLS, tool_choice="auto")
    if name == "count":
        body["stop"] = [", eight"]
    return body


async def _ask(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], answer: Answer, live: IO[str] | None
) -> None:
    started = time.monotonic()
    mode = ""
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            await r.aread()
            answer.transcript.errors.append(f"{r.status_code}: {r.text}")
            return
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            value = json.loads(line[6:])
            if answer.first_token_s is None and value.get("choices"):
                answer.first_token_s = time.monotonic() - started
            if value.get("usage"):
                answer.completion_tokens = int(value["usage"].get("completion_tokens") or 0)
            answer.transcript.add(value)
            if live is not None:
                mode = _print_live(live, value, mode)
    if live is not None:
        live.write("\n")


async def _main(out: IO[str], engine_url: str, models: str | None, short: bool) -> int:
    from worker.gateway.service import GatewayConfig, serve

    registry = load_registry(models)
    model = engine_model(engine_url)
    if registry.resolve(model) is None:
        raise ConfigError(
            f"the engine serves {model!r}, which the worker's model registry does not know "
            f"(it has {', '.join(sorted(registry.models))}): pass --models FILE"
        )
    questions = [*CONVERSATION[:2], CONVERSATION[-1]] if short else CONVERSATION
    async with running_system(out, registry) as system:
        config = GatewayConfig(
            engine_url=engine_url,
            render_url=None,
            engine_api_key=None,
            engine_timeout_s=300.0,
            bootstrap_servers=system.bootstrap,
            input_topic=INPUT_TOPIC,
            output_topic=OUTPUT_TOPIC,
            reply_partitions=None,
            reply_timeout_s=30.0,
            host="127.0.0.1",
            port=0,
            api_key=None,
            max_body_bytes=8 * 1024 * 1024,
            kafka={},
            control_topic=CONTROL_TOPIC,
        )
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        gateway = asyncio.create_task(serve(config, stop, ready.set_result))
        try:
            waits: set[asyncio.Future[Any]] = {gateway, ready}
            await asyncio.wait(waits, timeout=START_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
            if not ready.done():
                if gateway.done():
                    gateway.result()  # (raises the gateway's error)
                raise ConfigError("the demo's gateway did not start")
            url = ready.result()
            out.write(f"  gateway {url} → engine {engine_url} (model {model})\n")
            answers = [Answer(name) for name, *_ in questions]
            out.write(
                f"\nasking {len(questions)} questions through the gateway at once "
                f"(greedy, max_tokens {MAX_TOKENS}); live: {questions[0][0]}\n"
            )
            started = time.monotonic()
            async with httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=10.0)) as client:
                await asyncio.gather(
                    *(
                        _ask(
                            client,
                            url,
                            chat_body(model, name, question, tools is True),
                            answer,
                            out if n == 0 else None,
                        )
                        for n, ((name, question, _, tools), answer) in enumerate(
                            zip(questions, answers, strict=True)
                        )
                    )
                )
            elapsed = time.monotonic() - started
        finally:
            stop.set()
            await gateway
    for a in answers:
        out.write("\n" + a.transcript.render(a.name) + "\n")
    tokens = sum(a.completion_tokens for a in answers)
    firsts = [a.first_token_s * 1000 for a in answers if a.first_token_s is not None]
    out.write(
        f"\nsummary: {len(answers)} requests, {tokens} tokens generated by the engine in "
        f"{elapsed:.1f}s; time to first token through render → generate → Kafka → worker → "
        f"Kafka → gateway p50 {_percentile(firsts, 0.5):.0f} ms, max "
        f"{max(firsts, default=float('nan')):.0f} ms\n"
    )
    out.write("stopped the gateway, the worker, the broker and redis.\n")
    return system.code


def run_engine_demo(
    engine_url: str, models: str | None = None, short: bool = False, out: IO[str] = sys.stdout
) -> int:
    return run_main(out, _main(out, engine_url, models, short))
