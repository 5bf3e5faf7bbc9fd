"""The official `openai` SDK as the oracle of our streams (#25).

A real client reads what the worker publishes: every generated case's stream is served as
SSE to `openai.OpenAI` through a mock HTTP transport (the SDK's own request, SSE
decoding and chunk types run), read with `chat.completions.create(stream=True)` and
accumulated with the SDK's `ChatCompletionStreamState` (the code behind
`client.chat.completions.stream()`). The accumulation must not fail, and must be exactly
the worker's whole response to the same token ids (a `response` record), also read by
the SDK: content, reasoning (an unknown field, which the SDK keeps), tool calls (ids,
names, arguments as JSON), finish reasons, usage, logprobs. Completions the same way,
accumulated as a client does (the SDK has no accumulator for them).

The cases (`sdk_cases.py`): every registered reasoning / tool-call format and a plain
model, `n` = 1…3 with the choices' records interleaved at random, random chunkings,
logprobs with top candidates, usage (final and continuous), stop strings, `length`
finishes and aborts.

Where the SDK itself is wrong, the test says which behaviour and checks our bytes
directly instead — nothing is loosened silently:
- `ChatCompletionStreamState` keeps `stop_reason` from a choice's first chunk only (it
  copies `finish_reason` from later chunks, nothing else): the chunk that finishes a
  choice must carry the whole response's `stop_reason`;
- `abort` is outside the SDK's `finish_reason` literals: its snapshots are built without
  validation, so the string passes; chunk validation is checked with it set aside (and
  with a streamed completion's null `finish_reason`: the SDK types completion chunks as
  whole `Completion`s);
- the accumulator extends a choice's logprobs with its first chunk's entries twice when
  that first chunk carries logprobs: our opening chunk (no logprobs) comes first for
  every choice, which is checked, so the SDK's logprobs are compared as they are;
- `get_final_completion()` raises `LengthFinishReasonError` when a choice finished with
  `length`: the accumulated snapshot (`current_completion_snapshot`) is compared, and
  the final parse is required to succeed for every other stream;
- the opening's `content: ""` (OpenAI's own opening) makes a choice without content
  accumulate `""` where the whole response says `null`, and an empty reasoning (the
  older think-tag parsers' whole response says `""`, as vLLM 0.33's) cannot be told
  apart from none in a stream: compared as equal.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
from hypothesis import HealthCheck, given, settings
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.core.sdk.sdk_cases import Case, chat_cases, completion_cases, run_case
from tests.support.examples import examples

# The official SDK's finish reasons (its `Literal`s): vLLM's `abort` is none of them.
ABORT = "abort"
_settings = settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def sse(values: list[bytes]) -> bytes:
    """The SSE body a gateway writes from the output records: `data: <value>` each."""
    return b"".join(b"data: " + v + b"\n\n" for v in values)


def sdk(body: bytes, stream: bool) -> openai.OpenAI:
    """The SDK, its HTTP answered with `body` (the SDK's request and parsing run)."""
    media = "text/event-stream" if stream else "application/json"

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": media}, content=body)

    transport = httpx2.MockTransport(answer)
    return openai.OpenAI(
        api_key="test",
        base_url="http://derender.test/v1",
        http_client=httpx2.Client(transport=transport),
    )


MESSAGES: Any = [{"role": "user", "content": "?"}]


def _validate(model: Any, raw: dict[str, Any]) -> None:
    """Every body validates against the SDK's own type (strict pydantic), but for an
    `abort` finish, which is outside its literals (checked on our bytes instead), and a
    streamed completion's unfinished choice: the SDK types completion chunks as whole
    `Completion`s, whose `finish_reason` may not be null (OpenAI's streams say null)."""
    raw = json.loads(json.dumps(raw))
    for c in raw["choices"]:
        if c.get("finish_reason") == ABORT or (model is Completion and not c["finish_reason"]):
            c["finish_reason"] = "stop"  # any of its literals
    model.model_validate(raw)


def _none_if_empty(value: Any) -> Any:
    return value if value else None


def _calls(message: Any, cut: bool) -> list[tuple[Any, ...]]:
    """Each call, its arguments parsed as JSON (and as sent). `cut`: an abort cut the
    choice, and the formats that keep arguments as the model wrote them (Kimi K2,
    Mistral v11, DeepSeek V3, as vLLM does) may have been cut inside them: those are
    compared as text only."""
    out = []
    for c in message.tool_calls or []:
        args = c.function.arguments
        try:
            parsed = json.loads(args)
        except (TypeError, ValueError):
            assert cut, f"the arguments of {c.function.name} are not JSON: {args!r}"
            parsed = None
        out.append((c.id, c.type, c.function.name, parsed, args))
    return out


def check_chat(case: Case) -> None:
    check_chat_bytes(case, *run_case(case))


def check_chat_bytes(case: Case, streamed: list[bytes], whole: bytes) -> None:
    """`streamed`: the stream's SSE payloads ending `[DONE]`; `whole`: the response."""
    raw = [json.loads(v) for v in streamed if v != b"[DONE]"]
    assert streamed[-1] == b"[DONE]"
    # The SDK reads our stream and accumulates it.
    state = ChatCompletionStreamState()
    with sdk(sse(streamed), stream=True).chat.completions.create(
        model=case.model, messages=MESSAGES, stream=True
    ) as stream:
        for chunk in stream:
            state.handle_chunk(chunk)
    final = state.current_completion_snapshot
    if all(c.finish_reason not in ("length", ABORT) for c in final.choices):
        # SDK: the final parse raises LengthFinishReasonError for a `length` choice
        # (and would validate `abort` against its literals); else it must succeed.
        state.get_final_completion()
    for r in raw:
        _validate(ChatCompletionChunk, r)
    want = sdk(whole, stream=False).chat.completions.create(model=case.model, messages=MESSAGES)
    _validate(ChatCompletion, json.loads(whole))

    assert (
        [c.index for c in final.choices] == list(range(case.n)) == [c.index for c in want.choices]
    )
    finishing = {c["index"]: c for r in raw for c in r["choices"] if c["finish_reason"]}
    for got, exp in zip(final.choices, want.choices, strict=True):
        m, w = got.message, exp.message
        assert m.role == w.role == "assistant"
        assert _none_if_empty(m.content) == _none_if_empty(w.content)
        field = case.reasoning_field
        # An empty reasoning: the older think-tag parsers' whole response says "" (as
        # vLLM 0.33's), which no stream can tell apart from none.
        reasoning = (m.model_extra or {}).get(field), (w.model_extra or {}).get(field)
        assert _none_if_empty(reasoning[0]) == _none_if_empty(reasoning[1])
        cut = exp.finish_reason == ABORT
        assert _calls(m, cut) == _calls(w, cut)
        assert got.finish_reason == exp.finish_reason
        # SDK: `stop_reason` is kept from the choice's first chunk only; ours is on the
        # chunk that finishes the choice.
        assert finishing[got.index].get("stop_reason") == (exp.model_extra or {}).get("stop_reason")
        if case.logprobs:
            assert got.logprobs is not None and exp.logprobs is not None
            assert [e.model_dump() for e in got.logprobs.content or []] == [
                e.model_dump() for e in exp.logprobs.content or []
            ]
        else:
            assert got.logprobs is None and exp.logprobs is None
    # SDK: a choice first seen after the stream's first chunk is added with its logprobs,
    # which are then added again: every choice's first delta is its opening (a role, no
    # logprobs), or is in the stream's first chunk.
    first: dict[int, tuple[int, dict[str, Any]]] = {}
    for k, r in enumerate(raw):
        for c in r["choices"]:
            first.setdefault(c["index"], (k, c))
    assert all(c["delta"].get("role") for _, c in first.values())
    assert all(k == 0 or c["logprobs"] is None for k, c in first.values())
    if case.include_usage:
        assert final.usage is not None and final.usage.model_dump() == want.usage.model_dump()  # type: ignore[union-attr]


def check_completion(case: Case) -> None:
    streamed, whole = run_case(case)
    raw = [json.loads(v) for v in streamed if v != b"[DONE]"]
    texts: dict[int, str] = {}
    finish: dict[int, Any] = {}
    stop: dict[int, Any] = {}
    lps: dict[int, dict[str, list[Any]]] = {}
    usage = None
    with sdk(sse(streamed), stream=True).completions.create(
        model=case.model, prompt="?", stream=True
    ) as stream:
        for chunk in stream:
            for c in chunk.choices:
                texts[c.index] = texts.get(c.index, "") + c.text
                if c.finish_reason is not None:
                    finish[c.index] = c.finish_reason
                    stop[c.index] = (c.model_extra or {}).get("stop_reason")
                if c.logprobs is not None:
                    acc = lps.setdefault(c.index, {})
                    for k, v in c.logprobs.model_dump().items():
                        acc[k] = acc.get(k, []) + (v or [])
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
    for r in raw:
        _validate(Completion, r)
    want = sdk(whole, stream=False).completions.create(model=case.model, prompt="?")
    _validate(Completion, json.loads(whole))
    assert sorted(texts) == [c.index for c in want.choices] == list(range(case.n))
    for exp in want.choices:
        i = exp.index
        assert texts[i] == exp.text
        assert finish[i] == exp.finish_reason
        assert stop[i] == (exp.model_extra or {}).get("stop_reason")
        if case.logprobs:
            assert exp.logprobs is not None
            assert lps[i] == {k: v or [] for k, v in exp.logprobs.model_dump().items()}
        else:
            assert i not in lps and exp.logprobs is None
    if case.include_usage:
        assert usage == want.usage.model_dump()  # type: ignore[union-attr]


@_settings
@given(case=chat_cases())
def test_the_sdk_accumulates_every_chat_stream_to_the_whole_response(case: Case) -> None:
    check_chat(case)


@settings(_settings, max_examples=examples(40))
@given(case=completion_cases())
def test_completion_streams_read_by_the_sdk_add_up_to_the_whole_response(case: Case) -> None:
    check_completion(case)


def test_a_call_cut_after_its_name_has_empty_json_arguments_both_ways() -> None:
    """Found by the oracle: a JSON call list (`tool_choice: "required"`, strict tool
    calling off) cut after a call's name, before its arguments: the stream sent the call
    with no arguments at all (the SDK's accumulated arguments: None) and the whole
    response `""`; neither parses. Both say `{}` now, cut by `length` or an abort."""
    from tests.core.sdk.sdk_cases import registry
    from tests.support.helpers import Run

    reg = registry()
    tok = reg.models["required"].tokenizer
    text = '</think>[{"name": "get_weather", "parameters": '
    ids = list(tok.encode(text, add_special_tokens=False).ids)
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    req = {"tools": [tool], "tool_choice": "required"}
    for finish, closing in (("length", "end"), (None, "abort")):
        stream = Run(reg)
        head = {"model": "required", "chat_request": req}
        choice = {"index": 0, "token_ids": ids, "finish_reason": finish}
        stream.feed({"request_id": "r", "seq": 0, "generate_chunk": {"choices": [choice]}, **head})
        stream.feed({"request_id": "r", "seq": 1, "type": closing})
        calls = [
            tc
            for v in stream.values("chunk")
            for c in v["choices"]
            for tc in c["delta"].get("tool_calls", [])
        ]
        assert "".join(tc["function"].get("arguments", "") for tc in calls) == "{}"
        whole = Run(reg)
        gen = {"choices": [{"index": 0, "token_ids": ids, "finish_reason": finish or "abort"}]}
        whole.feed(
            {"request_id": "w", "seq": 0, "type": "response", **head, "generate_response": gen}
        )
        (resp,) = whole.values("response")
        (call,) = resp["choices"][0]["message"]["tool_calls"]
        assert call["function"] == {"name": "get_weather", "arguments": "{}"}
