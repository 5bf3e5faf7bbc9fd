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
    # The Responses / Messages events read, by type, in order (runs of one type counted).
    events: list[list[Any]] = field(default_factory=list)

    def add(self, value: dict[str, Any]) -> None:
        kind = value.get("type")
        if kind is None and value.get("object") == "response":
            kind = "response"  # (a whole Responses object)
        if isinstance(kind, str) and kind != "error":
            self._event(kind, value)  # (a Responses or Messages event, or their whole object)
            return
        if value.get("error"):
            error = value["error"]
            self.errors.append(f"{error.get('code') or error.get('type')}: {error.get('message')}")
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

    def _event(self, kind: str, v: dict[str, Any]) -> None:
        """The Responses and Messages APIs' events (one choice, index 0), and their whole
        objects (`response`, `message`)."""
        if self.events and self.events[-1][0] == kind:
            self.events[-1][1] += 1
        else:
            self.events.append([kind, 1])
        if kind in ("response.reasoning_text.delta", "response.output_text.delta"):
            into = self.reasoning if "reasoning" in kind else self.content
            into[0] = into.get(0, "") + v.get("delta", "")
        elif kind == "response.output_item.added" and v["item"].get("type") == "function_call":
            self.tools.setdefault(0, []).append(f"{v['item'].get('name')}(")
        elif kind == "response.function_call_arguments.delta":
            self.tools[0][-1] += v.get("delta", "")
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._response(v["response"], whole=False)
        elif kind == "response":
            self._response(v, whole=True)
        elif kind == "content_block_start" and v["content_block"].get("type") == "tool_use":
            self.tools.setdefault(0, []).append(f"{v['content_block'].get('name')}(")
        elif kind == "content_block_delta":
            d = v["delta"]
            if d.get("type") == "thinking_delta":
                self.reasoning[0] = self.reasoning.get(0, "") + d.get("thinking", "")
            elif d.get("type") == "text_delta":
                self.content[0] = self.content.get(0, "") + d.get("text", "")
            elif d.get("type") == "input_json_delta":
                self.tools[0][-1] += d.get("partial_json", "")
        elif kind == "message_delta":
            self.finish[0] = v["delta"].get("stop_reason")
        elif kind == "message":
            self.finish[0] = v.get("stop_reason")
            for block in v.get("content", []):
                if block.get("type") == "thinking":
                    self.reasoning[0] = self.reasoning.get(0, "") + block.get("thinking", "")
                elif block.get("type") == "text":
                    self.content[0] = self.content.get(0, "") + block.get("text", "")
                elif block.get("type") == "tool_use":
                    args = json.dumps(block.get("input"), ensure_ascii=False)
                    self.tools.setdefault(0, []).append(f"{block.get('name')}({args}")

    def _response(self, r: dict[str, Any], whole: bool) -> None:
        """A Responses object: its status (and why it is incomplete) is the finish; a whole
        one also brings its items."""
        reason = (r.get("incomplete_details") or {}).get("reason")
        self.finish[0] = f"{r.get('status')}" + (f" ({reason})" if reason else "")
        if r.get("error"):
            self.errors.append(f"{r['error'].get('code')}: {r['error'].get('message')}")
        if not whole:
            return
        for item in r.get("output", []):
            if item.get("type") == "function_call":
                self.tools.setdefault(0, []).append(f"{item.get('name')}({item.get('arguments')}")
                continue
            texts = [c.get("text", "") for c in item.get("content") or []]
            into = self.reasoning if item.get("type") == "reasoning" else self.content
            into[0] = into.get(0, "") + "".join(texts)

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
        if len(self.events) > 1:  # (a stream's, not one whole object)
            runs = (k if n == 1 else f"{k} ×{n}" for k, n in self.events)
            lines.append(f"(events) {' → '.join(runs)}")
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
