"""Reading the output topic the way a consumer should: drop repeated (request_id, seq, part).

`derender-worker tail` prints each request's text when its `[DONE]` arrives (or every
record raw, in replay's output format, with `--raw`).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from aiokafka import AIOKafkaConsumer

from worker.constants import DONE, H_PART, H_REQUEST_ID, H_SEQ

# How many (request_id, seq, part) triples are remembered for dedupe. Redeliveries come
# within one batch of a crash, so a bounded memory is enough for a long-running tail.
DEDUPE_CAPACITY = 1_000_000


class Dedupe:
    def __init__(self, capacity: int = DEDUPE_CAPACITY) -> None:
        self._seen: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self.capacity = capacity
        self.dropped = 0

    def first_time(self, headers: dict[str, str]) -> bool:
        triple = (
            headers.get(H_REQUEST_ID, ""),
            headers.get(H_SEQ, ""),
            headers.get(H_PART, ""),
        )
        if triple in self._seen:
            self.dropped += 1
            return False
        self._seen[triple] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return True


@dataclass
class Transcript:
    """A request's assembled message: text per choice, reasoning, tool calls, finish."""

    content: dict[int, str] = field(default_factory=dict)
    reasoning: dict[int, str] = field(default_factory=dict)
    tools: dict[int, list[str]] = field(default_factory=dict)
    finish: dict[int, str | None] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, value: dict[str, Any]) -> None:
        if "error" in value:
            self.errors.append(f"{value['error'].get('code')}: {value['error'].get('message')}")
            return
        for c in value.get("choices", []):
            i = c.get("index", 0)
            if "delta" in c:
                d = c["delta"]
                self.content[i] = self.content.get(i, "") + (d.get("content") or "")
                r = d.get("reasoning") or d.get("reasoning_content") or ""
                self.reasoning[i] = self.reasoning.get(i, "") + r
                for tc in d.get("tool_calls") or []:
                    calls = self.tools.setdefault(i, [])
                    fn = tc.get("function") or {}
                    while len(calls) <= tc.get("index", 0):
                        calls.append("")
                    if fn.get("name"):
                        calls[tc.get("index", 0)] += f"{fn['name']}("
                    calls[tc.get("index", 0)] += fn.get("arguments") or ""
            elif "message" in c:
                self.content[i] = c["message"].get("content") or ""
                self.reasoning[i] = c["message"].get("reasoning") or ""
            else:
                self.content[i] = self.content.get(i, "") + (c.get("text") or "")
            if c.get("finish_reason"):
                self.finish[i] = c["finish_reason"]

    def render(self, request_id: str) -> str:
        lines = [f"=== {request_id} ==="]
        for i in sorted(set(self.content) | set(self.reasoning) | set(self.tools)):
            head = f"[choice {i}, finish {self.finish.get(i)}]"
            lines.append(head)
            if self.reasoning.get(i):
                lines.append(f"(reasoning) {self.reasoning[i]}")
            if self.content.get(i):
                lines.append(self.content[i])
            for call in self.tools.get(i, []):
                lines.append(f"(tool call) {call})")
        lines += [f"(error) {e}" for e in self.errors]
        return "\n".join(lines)


async def tail(
    bootstrap_servers: str,
    topic: str,
    out: IO[str],
    raw: bool = False,
    from_beginning: bool = True,
    idle_exit_s: float | None = None,
    max_requests: int | None = None,
    on_done: Callable[[str, Transcript], None] | None = None,
    **consumer: Any,
) -> int:
    """Print the topic; stop after `idle_exit_s` without records or `max_requests` done.
    Returns the number of requests that finished."""
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        **consumer,
    )
    await c.start()
    dedupe = Dedupe()
    open_requests: dict[str, Transcript] = {}
    finished = 0
    last_record = time.monotonic()
    try:
        while True:
            batch = await c.getmany(timeout_ms=200)
            now = time.monotonic()
            if not batch and idle_exit_s is not None and now - last_record > idle_exit_s:
                break
            for msgs in batch.values():
                for m in msgs:
                    last_record = now
                    headers = {k: v.decode() for k, v in m.headers}
                    if not dedupe.first_time(headers):
                        continue
                    rid = headers.get(H_REQUEST_ID, "")
                    if raw:
                        value: Any = m.value.decode() if m.value == DONE else json.loads(m.value)
                        line = {"key": rid, "headers": headers, "value": value}
                        out.write(json.dumps(line, ensure_ascii=False) + "\n")
                    if m.value == DONE:
                        finished += 1
                        t = open_requests.pop(rid, Transcript())
                        if on_done is not None:
                            on_done(rid, t)
                        if not raw:
                            out.write(t.render(rid) + "\n")
                    else:
                        open_requests.setdefault(rid, Transcript()).add(json.loads(m.value))
                    out.flush()
            if max_requests is not None and finished >= max_requests:
                break
    finally:
        await c.stop()
    return finished
