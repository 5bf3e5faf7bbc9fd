"""Drivers for the parser tests: marker tokenizers, streaming as the core will stream,
and the merge of streamed events into one answer.

Streaming goes through the project's real incremental `Detokenizer` with special tokens
kept (the parser path of the core), and the parser state goes through msgpack between
records, as it does through Redis.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
from tokenizers import decoders as tk_decoders

from tests.conftest import DEEPSEEK_SPEC
from worker.adapters.tokenizers import load_tokenizer
from worker.core.parsers import (
    Content,
    Event,
    ParserSpec,
    ParserState,
    Reasoning,
    ToolCallArgs,
    ToolCallStart,
    compile_parser,
    feed,
    open_parser,
    parse_whole,
)
from worker.core.text.detokenize import Detokenizer
from worker.wire.inbound import ChatRequest

_state_codec = msgspec.msgpack.Decoder(ParserState)
_encode = msgspec.msgpack.Encoder().encode

# Marker tokens of the model families whose tokenizers cannot be loaded here
# (docs/reference/parsers.md): added to a small trained byte-level BPE, special or
# not as in the real tokenizer.
QWEN_ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
QWEN_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
KIMI_SPECIAL = [
    "<think>",
    "</think>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|im_end|>",
]
MISTRAL_SPECIAL = ["</s>", "[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"]
MISTRAL_OLD_SPECIAL = ["</s>", "[TOOL_CALLS]"]  # pre-v11: no [ARGS]
LLAMA_SPECIAL = ["<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<|python_start|>", "<|python_end|>"]
TEST_THINK_ADDED = ["<test:think>", "</test:think>"]

_CORPUS = [
    'This is a reasoning section. This is the rest. {"name": "get_weather", '
    '"arguments": {"city": "San Francisco", "unit": "celsius"}} <function=x>',
    "<parameter=city>\nDallas\n</parameter> [get_weather(city='Paris')] def f(x): return x",
    "日本語 テキスト 😀 emoji é à ü 杭州 北京 the quick brown fox jumps over",
]


def _base() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk_decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<eos>"],
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 5, trainer)
    return tok


_BASE_JSON: str | None = None


def marker_tokenizer(added: list[str] = (), special: list[str] = ()) -> Tokenizer:  # type: ignore[assignment]
    """A small byte-level BPE (trained here, deterministic) with marker tokens added."""
    global _BASE_JSON
    if _BASE_JSON is None:
        _BASE_JSON = _base().to_str()
    tok = Tokenizer.from_str(_BASE_JSON)
    if special:
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in special])
    if added:
        tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in added])
    return tok


@functools.cache
def deepseek_tokenizer() -> Tokenizer:
    """The real DeepSeek V4 tokenizer, outside a fixture (hypothesis, parametrize)."""
    tok, _ = load_tokenizer(DEEPSEEK_SPEC, Path.cwd())
    return tok


def plain_tokenizer() -> Tokenizer:
    """No marker tokens at all: every marker is several ordinary tokens."""
    return marker_tokenizer()


def request(tools: list[Any] | None = None, **kw: Any) -> ChatRequest:
    """A chat request; `tools` may be names or full OpenAI tool objects."""
    objs = None
    if tools is not None:
        objs = [
            t
            if isinstance(t, dict)
            else {"type": "function", "function": {"name": t, "parameters": {}}}
            for t in tools
        ]
    return msgspec.convert({"tools": objs, **kw}, ChatRequest)


def tool(name: str, **props: str) -> dict[str, Any]:
    """An OpenAI tool with typed properties (`tool("f", a="integer")`)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": v} for k, v in props.items()},
            },
        },
    }


@dataclass
class Result:
    """A merged answer: what a client reconstructs from the deltas."""

    reasoning: str | None = None
    content: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments)
    ids: list[str] = field(default_factory=list)
    # The kinds of text in the model's order, runs merged ("r", "c", a call's index).
    order: list[str | int] = field(default_factory=list, compare=False)

    def args(self) -> list[Any]:
        return [json.loads(a) for _, a in self.calls]

    def names(self) -> list[str]:
        return [n for n, _ in self.calls]


def merge(events: list[Event]) -> Result:
    r = Result()
    args: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for ev in events:
        kind: str | int = (
            "r" if isinstance(ev, Reasoning) else "c" if isinstance(ev, Content) else ev.index
        )
        if not r.order or r.order[-1] != kind:
            r.order.append(kind)
        if isinstance(ev, Reasoning):
            r.reasoning = (r.reasoning or "") + ev.text
        elif isinstance(ev, Content):
            r.content = (r.content or "") + ev.text
        elif isinstance(ev, ToolCallStart):
            assert ev.index not in names, f"second header for call {ev.index}"
            assert ev.index == len(names), "call indices must be 0, 1, 2, … in order"
            names[ev.index] = ev.name
            r.ids.append(ev.id)
            args[ev.index] = []
        elif isinstance(ev, ToolCallArgs):
            assert ev.index in names, "arguments before the call's header"
            assert ev.index == len(names) - 1, "arguments of an earlier call"
            args[ev.index].append(ev.text)
    r.calls = [(names[i], "".join(args[i])) for i in sorted(names)]
    return r


def check_events(events: list[Event]) -> None:
    """No empty text events; markers never leak (checked per format by callers)."""
    for ev in events:
        if isinstance(ev, Reasoning | Content | ToolCallArgs):
            assert ev.text, f"empty event {ev!r}"


@dataclass
class Parser:
    """A compiled spec plus how to open a choice for one test case."""

    spec: ParserSpec
    tok: Tokenizer
    req: ChatRequest | None = None
    prompt: list[int] | None = None
    strict: bool = True  # the model's strict_tool_calling

    def open(self) -> ParserState:
        return open_parser(self.spec, self.req, self.prompt, "req-1", 0, strict=self.strict)

    def ids(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(ids, skip_special_tokens=False))

    def whole(self, text: str, ids: list[int] | None = None) -> Result:
        st = self.open()
        ids = self.ids(text) if ids is None else ids
        parsed = parse_whole(self.spec, st, self.decode(ids), ids)
        r = Result(parsed.reasoning, parsed.content)
        r.calls = [(c.function.name, c.function.arguments) for c in parsed.tool_calls]
        r.ids = [c.id for c in parsed.tool_calls]
        return r

    def stream_ids(
        self, ids: list[int], cuts: list[int], *, roundtrip: bool = True
    ) -> tuple[list[list[Event]], ParserState]:
        """Feed `ids` cut at `cuts` (sorted positions), detokenized incrementally."""
        detok = Detokenizer(self.tok, skip_special_tokens=False)
        slot = Slot()
        st = self.open()
        bounds = [0, *[c for c in cuts if 0 < c < len(ids)], len(ids)]
        per_chunk: list[list[Event]] = []
        for n, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            chunk = ids[lo:hi]
            final = n == len(bounds) - 2
            text = detok.step(slot, chunk)
            if final:
                text += detok.flush(slot)
            if roundtrip:
                st = _state_codec.decode(_encode(st))
            fed = feed(self.spec, st, text, chunk, final)
            check_events(fed.events)
            per_chunk.append(fed.events)
        if len(bounds) == 2 and not ids:  # nothing generated: only the final feed
            pass
        return per_chunk, st

    def stream(self, text: str, every: int | None = 1, seed: int | None = None) -> Result:
        """Tokenize `text` and stream it `every` tokens per record (None: one record),
        or with random cuts from `seed`."""
        ids = self.ids(text)
        if seed is not None:
            rng = random.Random(seed)
            cuts = sorted({rng.randint(1, max(len(ids) - 1, 1)) for _ in range(len(ids) // 3)})
        elif every is None:
            cuts = []
        else:
            cuts = list(range(every, len(ids), every))
        if not ids:
            st = self.open()
            return merge(feed(self.spec, st, "", [], final=True).events)
        per_chunk, _ = self.stream_ids(ids, cuts)
        return merge([e for chunk in per_chunk for e in chunk])

    def stream_deltas(self, deltas: list[str]) -> Result:
        """Explicit text deltas (vLLM's streaming test cases), each tokenized."""
        st = self.open()
        events: list[Event] = []
        for n, delta in enumerate(deltas):
            st = _state_codec.decode(_encode(st))
            fed = feed(self.spec, st, delta, self.ids(delta), final=n == len(deltas) - 1)
            check_events(fed.events)
            events += fed.events
        return merge(events)

    def stream_chars(self, text: str, size: int) -> Result:
        """Text-only deltas of `size` characters (markers matched on text alone)."""
        st = self.open()
        events: list[Event] = []
        pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
        for n, piece in enumerate(pieces):
            fed = feed(self.spec, st, piece, None, final=n == len(pieces) - 1)
            events += fed.events
        return merge(events)

    def all_streams(self, text: str) -> list[tuple[str, Result]]:
        """The chunkings every streaming case is checked with."""
        out = [
            ("1 token", self.stream(text, 1)),
            ("3 tokens", self.stream(text, 3)),
            ("one record", self.stream(text, None)),
            ("random", self.stream(text, seed=7)),
        ]
        return out


class Slot:
    """A decode slot (`window`, `pending`) as the core's ChoiceState has."""

    def __init__(self) -> None:
        self.window: list[int] = []
        self.pending: list[int] = []


def parser(
    tok: Tokenizer,
    reasoning: str | None = None,
    tools: str | None = None,
    req: ChatRequest | None = None,
    prompt: list[int] | None = None,
    strict: bool = True,
    template: dict[str, Any] | None = None,
) -> Parser:
    spec = compile_parser(reasoning, tools, tok, response_template=template)
    return Parser(spec, tok, req, prompt, strict)


def expect(
    p: Parser,
    text: str,
    reasoning: str | None,
    content: str | None,
    calls: list[Any] | tuple[Any, ...],
) -> None:
    """The whole answer and every streamed one (`Parser.all_streams`) say exactly this;
    `calls` are (name, arguments as a JSON value) pairs."""
    for how, got in [("whole", p.whole(text)), *p.all_streams(text)]:
        assert (got.reasoning, got.content) == (reasoning, content), how
        assert [(n, json.loads(a)) for n, a in got.calls] == list(calls), how
