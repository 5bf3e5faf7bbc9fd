"""The comparison: one request read by the official `openai` SDK from two servers.

`compare(api, params, stream, ours, oracle)` sends the same body through two
`openai.OpenAI` clients — ours (the loop of tests/e2e/loop.py, or a gateway's URL) and the
oracle (vLLM's coupled `/v1/chat/completions` / `/v1/completions` on the same engine) —
reads each answer as a client does (a stream accumulated by the SDK's own
`ChatCompletionStreamState`, a completion stream added up choice by choice, a whole answer
parsed into the SDK's types) and returns every field that differs. Ids and `created` are
not compared; tool-call ids only by their shape.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import openai
from openai.lib.streaming.chat import ChatCompletionStreamState

# What a test writes beside the model and the prompt; everything else goes as extra_body.
TOOL_CALL_ID = re.compile(r"^chatcmpl-tool-[0-9a-f]+$")


@dataclass
class View:
    """What a client reads from one answer (one choice), ids and `created` aside."""

    text: str | None  # chat: the message content; completion: the text
    reasoning: str | None
    tool_calls: list[tuple[str, str]]  # (name, arguments)
    tool_call_ids_ok: bool  # every id has the `chatcmpl-tool-<hex>` shape
    finish_reason: str | None
    stop_reason: Any
    usage: dict[str, Any] | None  # prompt, completion and total tokens
    usage_details: dict[str, Any] | None  # the rest of usage that is set
    logprobs: Any


def _request(params: dict[str, Any], stream: bool) -> dict[str, Any]:
    body = dict(params)
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _split(body: dict[str, Any], typed: tuple[str, ...]) -> dict[str, Any]:
    """The SDK's keyword arguments: its typed ones, the rest as `extra_body`."""
    kwargs = {k: v for k, v in body.items() if k in typed}
    extra = {k: v for k, v in body.items() if k not in typed}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _none_if_empty(value: Any) -> Any:
    return value if value else None


def _dump(value: Any) -> Any:
    return None if value is None else value.model_dump()


COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _usage(usage: dict[str, Any] | None) -> tuple[Any, Any]:
    """The token counts, and the other usage fields that are set (details)."""
    if usage is None:
        return None, None
    details = {k: v for k, v in usage.items() if k not in COUNTS and v is not None}
    return {k: usage.get(k) for k in COUNTS}, details or None


def read_chat(client: openai.OpenAI, params: dict[str, Any], stream: bool) -> list[View]:
    """One view per choice, in index order."""
    kwargs = _split(_request(params, stream), ("model", "messages", "stream"))
    if not stream:
        resp = client.chat.completions.create(**kwargs)
        return [
            _chat_view(c.message, c.finish_reason, _stop_reason(c), resp.usage, c.logprobs)
            for c in resp.choices
        ]
    state = ChatCompletionStreamState()
    stop_reasons: dict[int, Any] = {}
    with client.chat.completions.create(**kwargs) as chunks:
        for chunk in chunks:
            state.handle_chunk(chunk)
            for c in chunk.choices:
                if c.finish_reason is not None:
                    # (the SDK keeps a choice's extras from its first chunk only)
                    stop_reasons[c.index] = _stop_reason(c)
    snap = state.current_completion_snapshot
    return [
        _chat_view(c.message, c.finish_reason, stop_reasons.get(c.index), snap.usage, c.logprobs)
        for c in snap.choices
    ]


def _stop_reason(choice: Any) -> Any:
    return (choice.model_extra or {}).get("stop_reason")


def _chat_view(message: Any, finish: Any, stop_reason: Any, usage: Any, logprobs: Any) -> View:
    calls = message.tool_calls or []
    extra = message.model_extra or {}
    return View(
        # A stream's opening `content: ""` accumulates to "" where a whole answer says null.
        text=_none_if_empty(message.content),
        reasoning=_none_if_empty(extra.get("reasoning")),
        tool_calls=[(c.function.name, c.function.arguments) for c in calls],
        tool_call_ids_ok=all(TOOL_CALL_ID.match(c.id or "") for c in calls),
        finish_reason=finish,
        stop_reason=stop_reason,
        usage=_usage(_dump(usage))[0],
        usage_details=_usage(_dump(usage))[1],
        logprobs=None if logprobs is None else [e.model_dump() for e in logprobs.content or []],
    )


def read_completion(client: openai.OpenAI, params: dict[str, Any], stream: bool) -> list[View]:
    """One view per choice, in index order (a client adds a stream up choice by choice:
    the SDK has no accumulator for completions)."""
    kwargs = _split(_request(params, stream), ("model", "prompt", "stream"))
    if not stream:
        resp = client.completions.create(**kwargs)
        usage = _usage(_dump(resp.usage))
        return [
            View(
                c.text, None, [], True, c.finish_reason, _stop_reason(c), *usage, _dump(c.logprobs)
            )
            for c in resp.choices
        ]
    texts: dict[int, str] = {}
    finish: dict[int, Any] = {}
    stop: dict[int, Any] = {}
    logprobs: dict[int, dict[str, list[Any]]] = {}
    usage = None
    with client.completions.create(**kwargs) as chunks:
        for chunk in chunks:
            for c in chunk.choices:
                texts[c.index] = texts.get(c.index, "") + c.text
                if c.finish_reason is not None:
                    finish[c.index], stop[c.index] = c.finish_reason, _stop_reason(c)
                if c.logprobs is not None:
                    acc = logprobs.setdefault(c.index, {})
                    for k, v in c.logprobs.model_dump().items():
                        acc[k] = acc.get(k, []) + (v or [])
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
    return [
        View(texts[i], None, [], True, finish.get(i), stop.get(i), *_usage(usage), logprobs.get(i))
        for i in sorted(texts)
    ]


def read(api: str, client: openai.OpenAI, params: dict[str, Any], stream: bool) -> list[View]:
    reader = read_chat if api == "chat" else read_completion
    return reader(client, params, stream)


def compare(
    api: str,
    params: dict[str, Any],
    stream: bool,
    ours: openai.OpenAI,
    oracle: openai.OpenAI,
) -> tuple[list[View], list[View], dict[str, tuple[list[Any], list[Any]]]]:
    """Both answers' views (one per choice) and every field that differs in some choice:
    {field: (ours per choice, the oracle's per choice)}; `choices` when their numbers do."""
    theirs = read(api, oracle, params, stream)
    mine = read(api, ours, params, stream)
    if len(mine) != len(theirs):
        return mine, theirs, {"choices": ([len(mine)], [len(theirs)])}
    diff = {}
    for f in dataclasses.fields(View):
        a, b = [getattr(v, f.name) for v in mine], [getattr(v, f.name) for v in theirs]
        if a != b:
            diff[f.name] = (a, b)
    return mine, theirs, diff


def read_error(
    api: str, client: openai.OpenAI, params: dict[str, Any], stream: bool
) -> tuple[int, Any]:
    """The status and error body a client gets for a request that must fail (200: an
    error event in a stream)."""
    try:
        view = read(api, client, params, stream)
    except openai.APIStatusError as e:
        return e.status_code, e.body
    except openai.APIError as e:
        return 200, e.body
    raise AssertionError(f"no error, but an answer: {view}")
