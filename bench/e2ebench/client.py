"""The bench's clients: one streamed request timed token by token, against three systems.

- `vllm`: the engine's coupled `/v1/chat/completions` (the oracle);
- `gateway`: the same body to `derender-worker gateway` (render → generate → Kafka →
  worker → Kafka → client);
- `direct`: render then generate called by hand on the engine, no Kafka: what the
  disaggregated API itself costs, and the engine's own time to its first event.

A token's time is when a chunk carrying it reaches the client: a chat chunk whose delta
holds content, reasoning or tool calls, or a generate event with token ids. Empty chunks
(the role, the usage, `[DONE]`) are not tokens, on every side alike.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from worker.gateway.requests import generate_request, one_rendered

VLLM, DIRECT, GATEWAY = "vllm", "direct", "gateway"
SYSTEMS = (VLLM, DIRECT, GATEWAY)


@dataclass
class Timed:
    """One streamed request as its client saw it."""

    system: str
    request_id: str = ""
    sent_wall: float = 0.0  # time.time() when the request was sent
    ttft_s: float | None = None  # sent → first token
    gaps_s: list[float] = field(default_factory=list)  # between successive tokens
    token_walls: list[float] = field(default_factory=list)  # time.time() of each token
    tokens: int = 0
    render_s: float | None = None  # direct: the render call
    error: str | None = None


def body(i: int, model: str, max_tokens: int) -> dict[str, Any]:
    """The i-th request: greedy, a fixed length, a prompt of its own (no shared prefix
    cache hit that one side would get and not the other: both sides send the same list)."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": f"Tell me a story about the number {i}."}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _chat_tokens(event: dict[str, Any]) -> bool:
    for c in event.get("choices") or []:
        d = c.get("delta") or {}
        if d.get("content") or d.get("reasoning") or d.get("reasoning_content"):
            return True
        if d.get("tool_calls"):
            return True
    return False


def _generate_tokens(event: dict[str, Any]) -> bool:
    return any(c.get("token_ids") for c in event.get("choices") or [])


async def _stream(
    client: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    out: Timed,
    t0: float,
    is_token: Any,
) -> None:
    async with client.stream("POST", url, json=payload) as r:
        if r.status_code != 200:
            out.error = f"{r.status_code} {(await r.aread())[:200]!r}"
            return
        last = None
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            now = time.perf_counter()
            event = json.loads(line[6:])
            out.request_id = out.request_id or str(event.get("id") or event.get("request_id"))
            if not is_token(event):
                continue
            out.tokens += 1
            out.token_walls.append(time.time())
            if last is None:
                out.ttft_s = now - t0
            else:
                out.gaps_s.append(now - last)
            last = now


async def one(client: httpx.AsyncClient, system: str, base: str, payload: dict[str, Any]) -> Timed:
    """One streamed request to `system` at `base` (the engine's URL, or the gateway's)."""
    out = Timed(system, sent_wall=time.time())
    t0 = time.perf_counter()
    try:
        if system == DIRECT:
            r = await client.post(f"{base}/v1/chat/completions/render", json=payload)
            out.render_s = time.perf_counter() - t0
            if r.status_code != 200:
                out.error = f"render {r.status_code}"
                return out
            rid = f"bench-{time.monotonic_ns()}"
            request = generate_request("chat", one_rendered("chat", r.json()), payload, rid)
            await _stream(
                client, f"{base}/inference/v1/generate", request, out, t0, _generate_tokens
            )
        else:
            await _stream(client, f"{base}/v1/chat/completions", payload, out, t0, _chat_tokens)
    except httpx.HTTPError as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    return out


async def wave(
    system: str,
    base: str,
    model: str,
    concurrency: int,
    per_client: int,
    max_tokens: int,
    first: int,
) -> list[Timed]:
    """`concurrency` clients, each sending `per_client` requests one after another; the
    prompts are numbered from `first`, so two systems given the same `first` get the same
    requests."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(120.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:

        async def run(c: int) -> list[Timed]:
            done = []
            for k in range(per_client):
                i = first + c * per_client + k
                done.append(await one(client, system, base, body(i, model, max_tokens)))
            return done

        results = await asyncio.gather(*(run(c) for c in range(concurrency)))
    return [t for r in results for t in r]
