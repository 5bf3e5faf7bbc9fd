"""Reference results for gpt-oss (Harmony) output: vLLM 0.33.0's `HarmonyParser`, re-stated.

Input: the token ids of one assistant completion as vLLM's derender sees them (the prompt
ends with `<|start|>assistant`, so the output usually begins `<|channel|>analysis<|message|>`),
including the stop token (`<|return|>`, `<|call|>`, `<|endoftext|>`) when there is one: the
parser is given `choice.token_ids` whole, the stop token is only dropped from the decoded
text. The ids go through openai_harmony's `StreamableParser(encoding, role=Role.ASSISTANT)`
one by one, exactly as `vllm/parser/harmony.py` does:

Per token (`HarmonyParser.process_chunk`)
  * `parser.process(id)`; an id that raises `HarmonyError` is skipped (no segment, not
    counted in the current message's tokens).
  * Then read `current_channel`, `current_recipient` (normalised, below) and
    `last_content_delta or ""`, and poll for one newly completed message (the parser's
    `messages` list grew). A completed message clears the current message's token list,
    otherwise the id is appended to it.
  * Recipient normalisation (`_normalize_recipient`): anything from `<|constrain|>` on is cut
    off and the rest right-stripped; an empty result is None.
  * Reasoning-token count: the token is counted when, after processing it, the channel is
    `analysis`, or `commentary` with a recipient, and the id is not a special token.

At the end (`flush`)
  * `parser.process_eos()` and poll one more completed message (a message interrupted in
    its body is completed with its channel: partial analysis → reasoning, partial final →
    content, partial call → a call with the partial arguments).
  * If that raises `HarmonyError` (the output ended in a header, or never had one): the
    tokens of the current message (since the last completed message, skipped ids excluded)
    are decoded with the HF tokenizer, special tokens kept, and become a `final` message of
    that text (streamed as one content delta at the end).

Classification (`_SegmentType.from_channel_and_recipient`)
  * recipient is a function (`is_function_recipient`: not empty, not starting with `<|`;
    `functions.X` with X non-empty; else not `assistant`, and neither the recipient nor its
    first dotted part is a built-in tool `python`, `browser`, `container`) → TOOL, name =
    recipient without a leading `functions.` (`math.sum` stays `math.sum`);
  * else channel `analysis` → REASONING (so `analysis to=browser.search` is reasoning);
  * else channel `final`, or `commentary` with no recipient → CONTENT;
  * anything else (e.g. `commentary to=assistant`, `commentary to=python`) → dropped.

Whole response (`HarmonyParser.parse`)
  * Only completed assistant messages with content count. Reasoning and content texts are
    joined with "\\n", empty texts skipped; nothing → None. Reasoning needs a reasoning
    parser, tool calls a tool parser (`--tool-call-parser openai --enable-auto-tool-choice`).
  * Tool arguments: content type present and without "json" → the raw text; otherwise
    `json.dumps(json.loads(text))` (default separators: `{"a": 1}`), the raw text when it
    does not parse (so `""` stays `""`).

Streaming (`HarmonyParser.parse_delta`, one call per chunk)
  * Reasoning / content deltas are concatenated per chunk; a completed-message segment
    resets the "previous recipient".
  * A TOOL delta whose recipient differs from the previous one opens a call: `{index,
    id (random), type, name, arguments: <this delta>}`; later deltas of the same call append
    raw text (no re-serialisation) to the chunk's last call entry, or emit `{index,
    arguments}`. The index counts calls in the response (reset on finish).
  * `include_reasoning: false` drops reasoning deltas; a chunk left with nothing → None.

Request rules after the parser (`assemble_chat_message_fields`, `ChatStreamProcessor`,
`resolve_finish_reason`)
  * `include_reasoning: false` → no reasoning.
  * Tool calls are kept for `tool_choice` "required" or named, or "auto" with tools (and a
    tool parser); otherwise they are dropped (their text does not move to content). Forced
    (required / named) → content `""` instead of None.
  * `parallel_tool_calls: false` keeps only the first call (index 0).
  * finish_reason "tool_calls" when calls are kept, the engine said "stop" and the tool
    choice is not a named tool; otherwise the engine's reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.vocab.tiktoken_convert import gpt_oss_tokenizer, harmony_encoding

BUILTIN_TOOLS = ("python", "browser", "container")


def normalize_recipient(recipient: str | None) -> str | None:
    if recipient is None:
        return None
    cut = recipient.find("<|constrain|>")
    if cut == -1:
        return recipient
    return recipient[:cut].rstrip() or None


def is_function_recipient(recipient: str | None) -> bool:
    if not recipient or recipient.startswith("<|"):
        return False
    if recipient.startswith("functions."):
        return len(recipient) > len("functions.")
    if recipient == "assistant" or recipient in BUILTIN_TOOLS:
        return False
    return recipient.split(".", 1)[0] not in BUILTIN_TOOLS


def function_name(recipient: str) -> str:
    return recipient.removeprefix("functions.")


def segment_type(channel: str | None, recipient: str | None) -> str:
    """One of "tool", "reasoning", "content", "ignore"."""
    if recipient and is_function_recipient(recipient):
        return "tool"
    if channel == "analysis":
        return "reasoning"
    if channel == "final" or (channel == "commentary" and recipient is None):
        return "content"
    return "ignore"


@dataclass
class Segment:
    """One processed token (or a flush result): the parser's state after it."""

    channel: str | None
    recipient: str | None
    delta: str
    message: Any = None  # the openai_harmony Message completed by this token, if any


def _default_decode(ids: Sequence[int]) -> str:
    return gpt_oss_tokenizer().decode(list(ids), skip_special_tokens=False)


class HarmonyState:
    """`HarmonyParser`'s state machine (process_chunk / flush) over one response."""

    def __init__(self, decode: Callable[[Sequence[int]], str] | None = None) -> None:
        self.encoding = harmony_encoding()
        self.decode = decode or _default_decode
        self._parser: Any = None
        self._done = 0
        self._current: list[int] = []
        self.reasoning_tokens = 0
        self.skipped: list[int] = []  # ids that raised HarmonyError
        self.recovered = False  # flush fell back to the raw text

    @property
    def parser(self) -> Any:
        if self._parser is None:
            from openai_harmony import Role, StreamableParser

            self._parser = StreamableParser(self.encoding, role=Role.ASSISTANT)
        return self._parser

    def current_recipient(self) -> str | None:
        return normalize_recipient(self.parser.current_recipient)

    def _poll(self) -> Any:
        messages = self.parser.messages
        if len(messages) <= self._done:
            return None
        msg = messages[self._done]
        msg.recipient = normalize_recipient(msg.recipient)
        self._done += 1
        return msg

    def process(self, ids: Sequence[int]) -> list[Segment]:
        from openai_harmony import HarmonyError

        out = []
        for token_id in ids:
            try:
                self.parser.process(token_id)
            except HarmonyError:
                self.skipped.append(token_id)
                continue
            channel = self.parser.current_channel
            recipient = normalize_recipient(self.parser.current_recipient)
            delta = self.parser.last_content_delta or ""
            msg = self._poll()
            if msg is not None:
                self._current.clear()
            else:
                self._current.append(token_id)
            is_reasoning = channel == "analysis" or (
                channel == "commentary" and recipient is not None
            )
            if is_reasoning and not self.encoding.is_special_token(token_id):
                self.reasoning_tokens += 1
            out.append(Segment(channel, recipient, delta, msg))
        return out

    def flush(self) -> list[Segment]:
        from openai_harmony import HarmonyError, Message, Role

        out = []
        try:
            self.parser.process_eos()
            msg = self._poll()
        except HarmonyError:
            self.recovered = True
            text = self.decode(self._current)
            out.append(Segment("final", None, text, None))
            msg = Message.from_role_and_content(Role.ASSISTANT, text).with_channel("final")
        self._parser = None
        self._done = 0
        self._current.clear()
        if msg is not None:
            out.append(Segment(msg.channel, msg.recipient, "", msg))
        return out


@dataclass
class Whole:
    reasoning: str | None
    content: str | None
    tool_calls: list[tuple[str, str]]
    reasoning_tokens: int
    segments: list[Segment] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    recovered: bool = False


def parse(
    ids: Sequence[int],
    *,
    reasoning_parser: bool = True,
    tool_parser: bool = True,
    decode: Callable[[Sequence[int]], str] | None = None,
) -> Whole:
    """`HarmonyParser.parse`: (reasoning, content, [(name, arguments)]) of a whole output."""
    state = HarmonyState(decode)
    segments = state.process(ids) + state.flush()
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[tuple[str, str]] = []
    for seg in segments:
        msg = seg.message
        if msg is None or msg.author.role != "assistant" or not msg.content:
            continue
        text = msg.content[0].text
        kind = segment_type(msg.channel, msg.recipient)
        if kind == "reasoning" and reasoning_parser and text:
            reasoning.append(text)
        elif kind == "content" and text:
            content.append(text)
        elif kind == "tool" and tool_parser:
            ctype = msg.content_type
            if ctype is not None and "json" not in ctype:
                args = text
            else:
                try:
                    args = json.dumps(json.loads(text))
                except json.JSONDecodeError:
                    args = text
            calls.append((function_name(msg.recipient), args))
    return Whole(
        "\n".join(reasoning) or None,
        "\n".join(content) or None,
        calls,
        state.reasoning_tokens,
        segments,
        state.skipped,
        state.recovered,
    )


def token_deltas(
    ids: Sequence[int], decode: Callable[[Sequence[int]], str] | None = None
) -> list[tuple[str | None, str | None, str]]:
    """(channel, recipient, delta) after each accepted token, then the flush's segments."""
    state = HarmonyState(decode)
    return [(s.channel, s.recipient, s.delta) for s in state.process(ids) + state.flush()]


def stream(
    ids: Sequence[int],
    chunks: Sequence[int] | None = None,
    *,
    reasoning_parser: bool = True,
    tool_parser: bool = True,
    include_reasoning: bool = True,
    decode: Callable[[Sequence[int]], str] | None = None,
) -> list[dict[str, Any] | None]:
    """`HarmonyParser.parse_delta` per chunk (`chunks` = chunk sizes, default one token
    each; the last chunk is the finishing one). Each delta is None or {"content"?,
    "reasoning"?, "tool_calls"?: [{"index", "name"?, "arguments"}]} (a call entry with a
    "name" also gets a random id from vLLM)."""
    sizes = list(chunks) if chunks is not None else [1] * len(ids)
    if sum(sizes) != len(ids):
        raise ValueError("chunk sizes do not add up to the output")
    state = HarmonyState(decode)
    next_index = 0
    out: list[dict[str, Any] | None] = []
    pos = 0
    for n, size in enumerate(sizes):
        finished = n == len(sizes) - 1
        prev = state.current_recipient()
        segments = state.process(ids[pos : pos + size])
        pos += size
        if finished:
            segments += state.flush()
        content = ""
        reasoning = ""
        calls: list[dict[str, Any]] = []
        for seg in segments:
            if seg.message is not None:
                prev = None
                continue
            kind = segment_type(seg.channel, seg.recipient)
            if kind == "reasoning" and reasoning_parser:
                reasoning += seg.delta
            elif kind == "content":
                content += seg.delta
            elif kind == "tool" and tool_parser:
                assert seg.recipient is not None
                if prev != seg.recipient:
                    name = function_name(seg.recipient)
                    calls.append({"index": next_index, "name": name, "arguments": seg.delta})
                    next_index += 1
                    prev = seg.recipient
                elif seg.delta:
                    if calls:
                        calls[-1]["arguments"] += seg.delta
                    else:
                        calls.append({"index": next_index - 1, "arguments": seg.delta})
        if finished:
            next_index = 0
        delta: dict[str, Any] = {}
        if content:
            delta["content"] = content
        if reasoning and include_reasoning:
            delta["reasoning"] = reasoning
        if calls:
            delta["tool_calls"] = calls
        out.append(delta or None)
    return out


# --------------------------------------------------------------------------- request rules


def _tool_choice(request: dict[str, Any]) -> Any:
    if "tool_choice" not in request and request.get("tools"):
        return "auto"
    return request.get("tool_choice", "none")


def _forced(request: dict[str, Any]) -> bool:
    choice = _tool_choice(request)
    return choice == "required" or isinstance(choice, dict)


def keeps_tool_calls(request: dict[str, Any], *, tool_parser: bool = True) -> bool:
    if _forced(request):
        return True
    return tool_parser and _tool_choice(request) == "auto" and bool(request.get("tools"))


def finish_reason(request: dict[str, Any], engine: str | None, calls_made: bool) -> str:
    reason = engine or "stop"
    if calls_made and reason == "stop" and not isinstance(_tool_choice(request), dict):
        return "tool_calls"
    return reason


def chat_message(
    whole: Whole,
    request: dict[str, Any],
    *,
    engine_finish: str | None = "stop",
    tool_parser: bool = True,
) -> dict[str, Any]:
    """The whole response's message fields: {reasoning, content, tool_calls, finish_reason}."""
    reasoning = whole.reasoning if request.get("include_reasoning", True) else None
    content = whole.content
    calls: list[tuple[str, str]] = []
    if keeps_tool_calls(request, tool_parser=tool_parser):
        if _forced(request):
            content = content or ""
        calls = list(whole.tool_calls)
        if request.get("parallel_tool_calls", True) is False:
            calls = calls[:1]
    return {
        "reasoning": reasoning,
        "content": content,
        "tool_calls": calls,
        "finish_reason": finish_reason(request, engine_finish, bool(calls)),
    }


def chat_stream(
    ids: Sequence[int],
    request: dict[str, Any],
    chunks: Sequence[int] | None = None,
    *,
    engine_finish: str | None = "stop",
    reasoning_parser: bool = True,
    tool_parser: bool = True,
) -> dict[str, Any]:
    """The streamed response, assembled: {reasoning, content, tool_calls: [(name,
    arguments)], finish_reason, deltas}; `deltas` are the per-chunk deltas after the
    request rules (None where vLLM's delta carries nothing but the role / finish)."""
    keep = keeps_tool_calls(request, tool_parser=tool_parser)
    raw = stream(
        ids,
        chunks,
        reasoning_parser=reasoning_parser,
        tool_parser=tool_parser,
        include_reasoning=request.get("include_reasoning", True),
    )
    deltas: list[dict[str, Any] | None] = []
    streamed = False
    for delta in raw:
        if delta is not None and delta.get("tool_calls"):
            if keep:
                streamed = True
            else:
                delta = {k: v for k, v in delta.items() if k != "tool_calls"}
                delta = delta if delta.get("content") or delta.get("reasoning") else None
        parallel = request.get("parallel_tool_calls", True) is not False
        if delta is not None and delta.get("tool_calls") and not parallel:
            delta["tool_calls"] = [c for c in delta["tool_calls"] if c["index"] == 0]
        deltas.append(delta)
    content = "".join((d or {}).get("content", "") for d in deltas)
    reasoning = "".join((d or {}).get("reasoning", "") for d in deltas)
    calls: dict[int, list[str]] = {}
    for d in deltas:
        for c in (d or {}).get("tool_calls", []):
            entry = calls.setdefault(c["index"], ["", ""])
            entry[0] = entry[0] or c.get("name", "")
            entry[1] += c.get("arguments", "")
    return {
        "reasoning": reasoning or None,
        "content": content or None,
        "tool_calls": [(n, a) for _, (n, a) in sorted(calls.items())],
        "finish_reason": finish_reason(request, engine_finish, streamed),
        "deltas": deltas,
    }
