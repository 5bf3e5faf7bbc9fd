"""`derender-worker tail`: each request's text when it ends, or every output raw.

The reading (each output once, in order, a request's end) is `OutputReader`'s; this
assembles a request's outputs into its text (`Transcript`) and prints it at the request's
end (its `[DONE]`, or its whole response), or, with `--raw`, prints every output in
replay's output format.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from worker.tools.output_reader import OutputReader
from worker.wire.output import Output


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
    """Print the topic; stop after `idle_exit_s` without an output or `max_requests` ended.
    `consumer`: aiokafka options (security, `isolation_level`). Returns the number of
    requests that ended."""
    reader = OutputReader(
        bootstrap_servers,
        topic,
        from_beginning=from_beginning,
        idle_timeout_s=idle_exit_s,
        **consumer,
    )
    open_requests: dict[str, Transcript] = {}
    finished = 0
    async with reader:
        async for o in reader:
            if raw:
                out.write(json.dumps(_raw_line(o), ensure_ascii=False) + "\n")
            t = open_requests.setdefault(o.request_id, Transcript())
            if not o.done:
                t.add(o.json())
            if o.end:
                finished += 1
                del open_requests[o.request_id]
                if on_done is not None:
                    on_done(o.request_id, t)
                if not raw:
                    out.write(t.render(o.request_id) + "\n")
            out.flush()
            if max_requests is not None and finished >= max_requests:
                break
    return finished


def _raw_line(o: Output) -> dict[str, Any]:
    """One output in replay's output format: `{"key", "headers", "value"}`."""
    return {
        "key": o.request_id,
        "headers": o.headers,
        "value": o.json() if not o.done else "[DONE]",
    }
