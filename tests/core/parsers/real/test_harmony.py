"""gpt-oss Harmony (`openai_gptoss` reasoning, `openai` tools; vLLM 0.33.0
vllm/parser/harmony.py) on gpt-oss's real tokenizer (o200k_harmony, rebuilt id for id from
`quicktok-v1`'s ranks: tests/support/vocab/tiktoken_convert.py), where every framing marker
is one special token.

Two oracles:
- the table: vLLM 0.33.0's answers for the same token ids (its render server on a gpt-oss
  model folder, `--reasoning-parser openai_gptoss --tool-call-parser openai`), each case
  whole and streamed in 1-token, 3-token, one-record and random chunks;
- the properties: random Harmony conversations through openai-harmony's own streaming
  parser, driven as vLLM drives it (tests/support/harmony_oracle.py).

Where vLLM's whole and streamed answers differ we give its whole answer in both
(docs/reference/differences.md, harmony-stream-join: messages joined with "\\n"), and
arguments as the model wrote them (vLLM streams them so; its whole response re-serializes
JSON): compared as JSON values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import Parser, Result, Slot, parser, request, tool
from tests.support import harmony_oracle as oracle
from tests.support.examples import examples
from tests.support.vocab.tiktoken_convert import gpt_oss_tokenizer
from worker.core.parsers import feed
from worker.core.parsers.machine.prose import FRAME_MAX
from worker.core.text.detokenize import Detokenizer

TOOLS = [tool("get_weather", location="string"), tool("get_time", tz="string")]
R = "<|channel|>analysis<|message|>The user asks for the weather.<|end|>"
NEXT = "<|start|>assistant"
CALL = NEXT + "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
FINAL = NEXT + "<|channel|>final<|message|>"
TOKYO = '{"location":"Tokyo"}'
REASON = "The user asks for the weather."


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return gpt_oss_tokenizer()


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    reasoning: str | None
    content: str | None
    calls: tuple[tuple[str, str], ...] = ()
    req: dict[str, Any] = field(default_factory=lambda: {"tools": TOOLS})


CASES = [
    Case("analysis-final", R + FINAL + "Hello!<|return|>", REASON, "Hello!"),
    Case("call", R + CALL + TOKYO + "<|call|>", REASON, None, (("get_weather", TOKYO),)),
    Case(
        "recipient-before-channel",
        R
        + NEXT
        + " to=functions.get_weather<|channel|>commentary json<|message|>"
        + TOKYO
        + "<|call|>",
        REASON,
        None,
        (("get_weather", TOKYO),),
    ),
    Case(
        "recipient-before-channel-constrain",
        R + NEXT + " to=functions.get_weather<|channel|>commentary <|constrain|>json"
        "<|message|>" + TOKYO + "<|call|>",
        REASON,
        None,
        (("get_weather", TOKYO),),
    ),
    Case(
        "no-content-type",
        R + NEXT + "<|channel|>commentary to=functions.get_weather<|message|>" + TOKYO + "<|call|>",
        REASON,
        None,
        (("get_weather", TOKYO),),
    ),
    Case(
        "two-analysis",
        "<|channel|>analysis<|message|>First thought.<|end|>"
        + NEXT
        + "<|channel|>analysis<|message|>Second thought.<|end|>"
        + FINAL
        + "Hi<|return|>",
        "First thought.\nSecond thought.",
        "Hi",
    ),
    Case(
        "preamble-then-call",
        R
        + NEXT
        + "<|channel|>commentary<|message|>Let me check.<|end|>"
        + CALL
        + TOKYO
        + "<|call|>",
        REASON,
        "Let me check.",
        (("get_weather", TOKYO),),
    ),
    Case(
        "preamble-final-join",
        "<|channel|>commentary<|message|>Let me look that up.<|end|>"
        + FINAL
        + "The answer is 42.<|return|>",
        None,
        "Let me look that up.\nThe answer is 42.",
    ),
    Case(
        "two-calls",
        R
        + CALL
        + TOKYO
        + "<|call|>"
        + NEXT
        + "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>"
        '{"tz":"JST"}<|call|>',
        REASON,
        None,
        (("get_weather", TOKYO), ("get_time", '{"tz":"JST"}')),
    ),
    Case(
        "call-then-final",
        R + CALL + TOKYO + "<|call|>" + FINAL + "Checking now.<|return|>",
        REASON,
        "Checking now.",
        (("get_weather", TOKYO),),
    ),
    Case(
        "dotted-name",
        R + NEXT + '<|channel|>commentary to=math.sum <|constrain|>json<|message|>{"a": 2}<|call|>',
        REASON,
        None,
        (("math.sum", '{"a": 2}'),),
    ),
    Case(
        "bare-recipient",
        R + NEXT + "<|channel|>commentary to=get_weather <|constrain|>json<|message|>"
        '{"location":"X"}<|call|>',
        REASON,
        None,
        (("get_weather", '{"location":"X"}'),),
    ),
    Case(
        "to-assistant",
        "<|channel|>commentary to=assistant<|message|>Some tool response<|end|>"
        + FINAL
        + "Here is the answer<|return|>",
        None,
        "Here is the answer",
    ),
    Case(
        "builtin-on-analysis",
        R + NEXT + "<|channel|>analysis to=browser.search <|constrain|>json<|message|>"
        '{"query":"vllm"}<|call|>',
        REASON + '\n{"query":"vllm"}',
        None,
    ),
    Case(
        "builtin-on-commentary",
        R + NEXT + "<|channel|>commentary to=python code<|message|>print(1 + 1)<|call|>",
        REASON,
        None,
    ),
    Case(
        "code-content-type",
        R + NEXT + "<|channel|>commentary to=functions.get_weather <|constrain|>code"
        "<|message|>print( 1 )<|call|>",
        REASON,
        None,
        (("get_weather", "print( 1 )"),),
    ),
    Case(
        "args-not-json",
        R + CALL + "{'location': 'Tokyo'}<|call|>",
        REASON,
        None,
        (("get_weather", "{'location': 'Tokyo'}"),),
    ),
    Case("args-empty", R + CALL + "<|call|>", REASON, None, (("get_weather", ""),)),
    Case(
        "args-unicode",
        R + CALL + '{"location":"東京 😀"}<|call|>',
        REASON,
        None,
        (("get_weather", '{"location":"東京 😀"}'),),
    ),
    Case(
        "cut-in-analysis",
        "<|channel|>analysis<|message|>I am thinking about the",
        "I am thinking about the",
        None,
        req={},
    ),
    Case("cut-in-final", R + FINAL + "The answer is", REASON, "The answer is"),
    Case(
        "cut-in-args",
        R + CALL + '{"location":"To',
        REASON,
        None,
        (("get_weather", '{"location":"To'),),
    ),
    # The output ends inside a header: the message's raw text is content (vLLM's recovery).
    Case(
        "cut-in-header", R + NEXT + "<|channel|>comm", REASON, "<|start|>assistant<|channel|>comm"
    ),
    Case("cut-after-start", R + NEXT, REASON, "<|start|>assistant"),
    Case(
        "no-header",
        "Hello there, no header at all.<|return|>",
        None,
        "Hello there, no header at all.<|return|>",
        req={},
    ),
    # Text before the first header is its recipient: a call named "Hi" (as openai-harmony
    # reads the header "Hi<|channel|>final").
    Case(
        "text-before-header",
        "Hi<|channel|>final<|message|>Hello!<|return|>",
        None,
        None,
        (("Hi", "Hello!"),),
    ),
    Case(
        "stray-end",
        "<|channel|>analysis<|message|>think<|end|><|end|>" + FINAL + "ok<|return|>",
        "think",
        "ok",
    ),
    Case("message-without-channel", "<|message|>hello<|end|>" + FINAL + "Hi<|return|>", None, "Hi"),
    Case(
        "specials-in-body",
        "<|channel|>final<|message|>a<|start|>b<|channel|>c<|return|>",
        None,
        "a<|start|>b<|channel|>c",
    ),
    Case("endoftext-in-body", R + FINAL + "Hi<|endoftext|>", REASON, "Hi<|endoftext|>"),
    Case("endoftext-after-end", R + FINAL + "Hi<|end|><|endoftext|>", REASON, "Hi"),
    Case("call-ends-final", R + FINAL + "Hi<|call|>", REASON, "Hi"),
    Case(
        "constrain-on-final",
        R + NEXT + '<|channel|>final <|constrain|>json<|message|>{"a":1}<|return|>',
        REASON,
        '{"a":1}',
    ),
    Case(
        "call-ended-by-end",
        R + CALL + TOKYO + "<|end|>" + FINAL + "Done<|return|>",
        REASON,
        "Done",
        (("get_weather", TOKYO),),
    ),
    Case(
        "call-ended-by-return",
        R + CALL + TOKYO + "<|return|>",
        REASON,
        None,
        (("get_weather", TOKYO),),
    ),
    Case("empty-final", R + FINAL + "<|return|>", REASON, None),
    Case(
        "malformed-header",
        "<|channel|>analysis<|message|>thinking<|end|>"
        + NEXT
        + "<|channel|>commentary<|message|>thinking<|end|>"
        + NEXT
        + '<|channel|>final {"answer": "hi"}<|return|>',
        "thinking",
        'thinking\n<|start|>assistant<|channel|>final {"answer": "hi"}<|return|>',
    ),
    Case(
        "tool-choice-none",
        R + CALL + TOKYO + "<|call|>",
        REASON,
        None,
        req={"tools": TOOLS, "tool_choice": "none"},
    ),
    Case("no-tools", R + CALL + TOKYO + "<|call|>", REASON, None, req={}),
    Case(
        "required",
        R + CALL + TOKYO + "<|call|>",
        REASON,
        None,
        (("get_weather", TOKYO),),
        req={"tools": TOOLS, "tool_choice": "required"},
    ),
    Case(
        "named",
        R + CALL + TOKYO + "<|call|>",
        REASON,
        None,
        (("get_weather", TOKYO),),
        req={
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        },
    ),
    Case(
        "parallel-false",
        R
        + CALL
        + TOKYO
        + "<|call|>"
        + NEXT
        + "<|channel|>commentary to=functions.get_time<|message|>{}<|call|>",
        REASON,
        None,
        (("get_weather", TOKYO),),
        req={"tools": TOOLS, "parallel_tool_calls": False},
    ),
    Case(
        "hidden-reasoning", R + FINAL + "Hi<|return|>", None, "Hi", req={"include_reasoning": False}
    ),
]


def _results(p: Parser, text: str) -> list[tuple[str, Result]]:
    return [("whole", p.whole(text)), *p.all_streams(text)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_vllm_cases(tok: Tokenizer, case: Case) -> None:
    p = parser(tok, "openai_gptoss", "openai", req=request(**case.req))
    forced = "tool_choice" in case.req and case.req["tool_choice"] != "none"
    for how, got in _results(p, case.text):
        content = (case.content or "") if forced and how == "whole" else case.content
        assert (got.reasoning, got.content) == (case.reasoning, content), how
        assert got.calls == list(case.calls), how


def test_without_tool_parser_calls_are_dropped(tok: Tokenizer) -> None:
    # vLLM: with `--reasoning-parser openai_gptoss` alone a call's text goes nowhere.
    p = parser(tok, "openai_gptoss", None, req=request(TOOLS))
    for how, got in _results(p, R + CALL + TOKYO + "<|call|>" + FINAL + "Hi<|return|>"):
        assert (got.reasoning, got.content, got.calls) == (REASON, "Hi", []), how


def test_without_reasoning_parser_analysis_is_dropped(tok: Tokenizer) -> None:
    p = parser(tok, None, "openai", req=request(TOOLS))
    for how, got in _results(p, R + CALL + TOKYO + "<|call|>"):
        want = (None, None, [("get_weather", TOKYO)])
        assert (got.reasoning, got.content, got.calls) == want, how


def test_markers_written_as_text_are_text(tok: Tokenizer) -> None:
    """A framing marker spelled with ordinary tokens is no marker (openai-harmony reads
    ids): it stays in the final message's text."""
    p = parser(tok, "openai_gptoss", "openai", req=request(TOOLS))
    ordinary = [i for piece in ("<|", "end", "|>") for i in p.ids(piece)]
    ids = p.ids(FINAL[len(NEXT) :] + "a") + ordinary + p.ids("b<|return|>")
    got = p.whole("", ids)
    assert (got.reasoning, got.content) == (None, "a<|end|>b")


def test_reasoning_tokens_are_counted_as_vllm_counts_them(tok: Tokenizer) -> None:
    p = parser(tok, "openai_gptoss", "openai", req=request(TOOLS))
    text = R + CALL + TOKYO + "<|call|>" + FINAL + "Hi<|return|>"
    ids = p.ids(text)
    _, st = p.stream_ids(ids, list(range(1, len(ids))))
    assert st.reasoning_tokens == oracle.parse(ids).reasoning_tokens
    assert st.reasoning_tokens == len(p.ids(REASON)) + len(p.ids(TOKYO))


def test_a_header_without_end_is_bounded(tok: Tokenizer) -> None:
    """No `<|message|>` ever: the header is held up to FRAME_MAX, then it is content
    (vLLM holds the whole output and sends it at the end)."""
    p = parser(tok, "openai_gptoss", "openai", req=request(TOOLS))
    text = "word " * 1000
    ids = p.ids(text)
    per_chunk, st = p.stream_ids(ids, list(range(10, len(ids), 10)))
    assert len(st.head) <= FRAME_MAX
    assert "".join(e.text for c in per_chunk for e in c) == text  # type: ignore[attr-defined]
    assert per_chunk[len(per_chunk) // 2], "the text streams once it is no header"


# -- properties against openai-harmony ----------------------------------------------------

BODIES = hs.text(
    alphabet=hs.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=24
) | hs.sampled_from(['{"location":"Tokyo"}', "  spaced  ", "\n", "東京 😀", '{"a": [1, 2]}'])


@hs.composite
def conversations(draw: Any) -> str:
    """Harmony messages as gpt-oss writes them, and now and then as it should not."""
    parts: list[str] = []
    for n in range(draw(hs.integers(1, 4))):
        start = "" if n == 0 else NEXT
        channel = draw(hs.sampled_from(["analysis", "final", "commentary", "commentary"]))
        recipient = draw(
            hs.sampled_from(
                [
                    "",
                    "",
                    " to=functions.get_weather",
                    " to=get_time",
                    " to=browser.search",
                    " to=assistant",
                    " to=math.sum",
                ]
            )
        )
        ctype = draw(hs.sampled_from(["", " <|constrain|>json", " json", " <|constrain|>code"]))
        if recipient and draw(hs.booleans()):
            header = f"{start}{recipient}<|channel|>{channel}{ctype}"
        else:
            header = f"{start}<|channel|>{channel}{recipient}{ctype}"
        end = draw(
            hs.sampled_from(["<|end|>", "<|call|>" if recipient else "<|end|>", "<|return|>"])
        )
        parts.append(header + "<|message|>" + draw(BODIES) + end)
    text = "".join(parts)
    if draw(hs.booleans()):  # cut anywhere (a length finish)
        text = text[: draw(hs.integers(0, len(text)))]
    return text


def _same_args(ours: str, theirs: str) -> bool:
    """vLLM's whole response re-serializes JSON arguments; ours are as written."""
    if ours == theirs:
        return True
    try:
        return bool(json.loads(ours) == json.loads(theirs))
    except ValueError:
        return False


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=conversations(),
    seed=hs.integers(0, 2**16),
    req=hs.sampled_from([{"tools": TOOLS}, {}, {"tools": TOOLS, "tool_choice": "none"}]),
)
def test_stream_equals_whole_equals_openai_harmony(
    text: str, seed: int, req: dict[str, Any]
) -> None:
    tok = gpt_oss_tokenizer()
    p = parser(tok, "openai_gptoss", "openai", req=request(**req))
    ids = p.ids(text)
    want = oracle.chat_message(oracle.parse(ids), req)
    whole = p.whole(text)
    got = [("whole", whole), ("random", p.stream(text, seed=seed)), ("1 token", p.stream(text))]
    for how, r in got:
        assert (r.reasoning, r.content) == (want["reasoning"], want["content"]), how
        assert [n for n, _ in r.calls] == [n for n, _ in want["tool_calls"]], how
        for (_, a), (_, b) in zip(r.calls, want["tool_calls"], strict=True):
            assert _same_args(a, b), (how, a, b)
        assert r.calls == whole.calls, how  # arguments only append: stream == whole


@settings(max_examples=examples(60), deadline=None)
@given(text=conversations())
def test_state_stays_bounded(text: str) -> None:
    tok = gpt_oss_tokenizer()
    p = parser(tok, "openai_gptoss", "openai", req=request(TOOLS))
    ids = p.ids(text * 20)
    st = p.open()
    for k in range(0, len(ids), 5):
        chunk = ids[k : k + 5]
        feed(p.spec, st, p.decode(chunk), chunk, final=k + 5 >= len(ids))
        assert len(msgspec.msgpack.encode(st)) < 2 * FRAME_MAX


@pytest.mark.parametrize("every", [1, 3])
def test_hidden_reasoning_shows_only_the_answers_logprobs(tok: Tokenizer, every: int) -> None:
    """`include_reasoning: false`: the tokens whose logprobs stay are the answer's and
    the calls' own; every message header (the first one too: read before its channel is
    known) is hidden with the reasoning."""
    p = parser(tok, "openai_gptoss", "openai", req=request(TOOLS, include_reasoning=False))
    text = R + CALL + TOKYO + "<|call|>" + FINAL + "Hi there.<|return|>"
    ids = p.ids(text)
    detok = Detokenizer(tok, skip_special_tokens=False)
    slot, st = Slot(), p.open()
    shown: list[int] = []
    for lo in range(0, len(ids), every):
        chunk = ids[lo : lo + every]
        final = lo + every >= len(ids)
        piece = detok.step(slot, chunk) + (detok.flush(slot) if final else "")
        fed = feed(p.spec, st, piece, chunk, final)
        shown += [t for k, t in enumerate(chunk) if not (fed.hidden and fed.hidden[k])]
    wanted = p.ids(TOKYO) + p.ids("Hi there.")
    assert [t for t in shown if t not in p.spec.marker_ids] == wanted
