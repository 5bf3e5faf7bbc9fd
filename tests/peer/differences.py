"""Known, deliberate differences between our derender and vLLM 0.33.0's.

Each has a stable id (README.md's "Differences from vLLM 0.33" table lists exactly these
ids, checked by `test_differences_readme.py`), a one-line title, and a predicate saying
whether one observed difference of one case (`compare.Diff`: field path, vLLM's value,
ours) is explained by it. A case whose every difference is explained by some entry
counts as `documented`; any other difference fails it.

Imports nothing of the project: it is read by a test that runs without vLLM or httpx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Difference:
    id: str
    title: str
    explains: Callable[[Any, Any], bool]  # (case, diff) -> bool


def _stream_stop(case: Any, diff: Any) -> bool:
    """vLLM refuses a streaming request with `stop` (HTTP 400); we hold back the tail
    that could still become a stop string and cut there."""
    stop = case.request.get("stop")
    return (
        case.stream
        and bool(stop)
        and diff.path == "error"
        and isinstance(diff.vllm, dict)
        and diff.vllm.get("topic") == "stop-streaming"
        and diff.ours is None
    )


def _stream_opening(case: Any, diff: Any) -> bool:
    """A chat stream opens with one role chunk per choice, 0…n−1 in order, before any
    output, as vLLM's chat server opens it; vLLM's derender endpoint sends each choice's
    role with its first delta (compare.py takes the opening apart and checks it here)."""
    n = (case.request.get("n") or 1) if case.api == "chat" else 0
    return case.stream and diff.path == "stream_opening" and diff.ours == list(range(n))


def _usage_at_end(case: Any, diff: Any) -> bool:
    """With `stream_options.include_usage` and no usage event from the engine, vLLM's
    streaming derender sends no usage chunk (it only forwards the engine's); we compute
    the usage at `end`."""
    so = case.request.get("stream_options") or {}
    return (
        case.stream
        and bool(so.get("include_usage"))
        and case.engine_usage == "none"
        and diff.path == ".usage"
        and diff.vllm == []
        and isinstance(diff.ours, list)
        and len(diff.ours) == 1
    )


def _echo(case: Any, diff: Any) -> bool:
    """Completion `echo`: vLLM's derender ignores it; we put the prompt text first, as
    the coupled /v1/completions does."""
    return (
        case.api == "completion"
        and bool(case.request.get("echo"))
        and diff.path.endswith(".text")
        and isinstance(diff.vllm, str)
        and isinstance(diff.ours, str)
        and diff.ours.endswith(diff.vllm)
    )


def _stop_after_length(case: Any, diff: Any) -> bool:
    """A whole response that finished with "length" but whose text holds a stop string
    (an engine without a tokenizer cannot see stop strings): vLLM searches the stop
    strings only when the engine said "stop"; we cut, with finish "stop"."""
    if case.stream or not case.request.get("stop"):
        return False
    if not any(g.finish_reason == "length" for gen in case.outputs for g in gen):
        return False
    tail = diff.path.rsplit(".", 1)[-1]
    if tail == "finish_reason":
        return diff.vllm == "length" and diff.ours == "stop"
    if tail == "stop_reason":
        return diff.vllm is None and isinstance(diff.ours, str)
    if tail in ("text", "content"):
        return (
            isinstance(diff.vllm, str)
            and isinstance(diff.ours, str)
            and (diff.vllm.startswith(diff.ours))
        )
    return False


def _partial_char_at_end(case: Any, diff: Any) -> bool:
    """The output ends inside a UTF-8 character (the rest never came, or EOS followed):
    vLLM's incremental detokenizer never emits those bytes; we flush them as U+FFFD, so
    the text equals the one-shot decode (CONTRACT.md §4.5)."""
    tail = diff.path.rsplit(".", 1)[-1]
    if tail not in ("text", "content", "reasoning"):
        return False
    v, o = diff.vllm, diff.ours
    # ours = vLLM's text + the held tokens' text (at most a few characters) ending in U+FFFD
    return (
        isinstance(v, str)
        and isinstance(o, str)
        and o.startswith(v)
        and o.endswith("\ufffd")
        and len(o) - len(v) <= 8
    )


def _error_we_raise(topic: str, stream_only: bool) -> Callable[[Any, Any], bool]:
    def explains(case: Any, diff: Any) -> bool:
        return (
            (case.stream or not stream_only)
            and diff.path == "error"
            and diff.vllm is None
            and isinstance(diff.ours, dict)
            and diff.ours.get("topic") == topic
        )

    return explains


def _lax_required_stream(case: Any, diff: Any) -> bool:
    """Strict tool calling off, tool_choice "required", the constrained JSON array
    streamed in small chunks: vLLM's streaming derender emits no tool call (and finish
    "stop"), while its whole response parses the same text into the call; we stream the
    call."""
    if not (
        case.stream
        and case.server == "lax"
        and case.request.get("tool_choice") == "required"
        and case.extra.get("shape") == "json-required"
    ):
        return False
    tail = diff.path.rsplit(".", 1)[-1]
    if tail == "finish_reason":
        return diff.vllm == ["stop"] and diff.ours == ["tool_calls"]
    if tail == "order":  # the same order, less vLLM's missing calls
        return diff.vllm == [x for x in diff.ours if not str(x).startswith("tool:")]
    return ".tool_calls." in diff.path and diff.vllm == "<absent>"


# Llama 3.2: the servers with the llama3_json tool parser, its call marker, and the text of
# its special tokens (`<|eot_id|>`, `<|reserved_special_token_2|>`, …).
LLAMA_TOOL_SERVERS = ("llama-tools", "llama-lax")
PYTHON_TAG = "<|python_tag|>"
PYTHON_TAG_ID = 128010
_LLAMA_SPECIAL = re.compile(r"<\|[a-z0-9_]+\|>")
_CHOICE = re.compile(r"^\.choices\.(\d+)\.")


def _field(diff: Any) -> str:
    """The diff's path below its choice (`content`, `tool_calls.0.arguments`, …)."""
    return re.sub(r"^\.choices\.\d+\.(message\.)?", "", diff.path)


def _gen(case: Any, diff: Any) -> Any:
    """The generated choice a diff is about (the first output's, by choice index)."""
    m = _CHOICE.match(diff.path)
    index = int(m.group(1)) if m else 0
    return next((g for g in case.outputs[0] if g.index == index), None)


def _llama_tools_chat(case: Any) -> bool:
    return case.api == "chat" and case.server in LLAMA_TOOL_SERVERS


def _complete_call(call: Any) -> bool:
    """A streamed call (compare.fold_stream's entry) with a name and JSON-object arguments."""
    if not isinstance(call, dict) or not call.get("name"):
        return False
    return _json_object(call.get("arguments"))


def _json_object(text: Any) -> bool:
    try:
        return isinstance(text, str) and isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _closed_where_cut(v: Any, o: Any) -> bool:
    """Arguments cut short: ours are the text as far as it was written, closed where it
    stopped being JSON (json_check.py), vLLM's that text left open (or less of it)."""
    if not (isinstance(v, str) and isinstance(o, str)) or v == o or not _json_object(o):
        return False
    return v.startswith(o.rstrip('"}] ')) or o.startswith(v)


def _special_skip_set(case: Any, diff: Any) -> bool:
    """`skip_special_tokens` (and the parser path, which always drops specials):
    vLLM's derender decodes with its slow incremental path, which skips only the
    tokenizer's named specials (BOS, EOS), so other special added tokens
    (`<｜▁pad▁｜>`, placeholders) stay in the text; vLLM's own engine (tokenizers'
    DecodeStream) and we skip every token tokenizer.json marks special."""
    req = case.request
    if not (
        diff.path.rsplit(".", 1)[-1] in ("text", "content")
        and isinstance(diff.vllm, str)
        and isinstance(diff.ours, str)
    ):
        return False
    if case.server in (*LEGACY_FAMILY_SERVERS, M3_SERVER):
        # The same with hermes (Qwen3), minimax_m2_append_think (MiniMax M2) and MiniMax
        # M3's parsers (chat; its completions are the slow path above), whose paths drop
        # no special token either: ours is vLLM's text less exactly the special tokens of
        # the output (`cases_families.mark_specials` lists their texts).
        found = [t for t in case.extra.get("specials", ()) if t in diff.vllm]
        rest = diff.vllm
        for t in found:
            rest = rest.replace(t, "")
        return bool(found) and rest == diff.ours
    if case.server in GPTOSS_SERVERS:
        # gpt-oss completions (a chat answer is read from the ids by the Harmony parser):
        # vLLM drops only the tokenizer's named specials (<|startoftext|>, <|return|>,
        # <|endoftext|>) and keeps the framing markers (<|channel|>, <|message|>, …) and
        # reserved tokens; ours is vLLM's text less exactly the special tokens it kept.
        if case.api != "completion":
            return False
        found = [t for t in case.extra.get("specials", ()) if t in diff.vllm]
        rest = diff.vllm
        for t in found:
            rest = rest.replace(t, "")
        return bool(found) and rest == diff.ours
    if case.server.startswith("llama-"):
        # Llama's legacy llama3_json parser drops nothing: with it vLLM's text keeps every
        # special token (BOS and EOS too). Ours is vLLM's text less exactly those tokens.
        skipping = _llama_tools_chat(case) or req.get("skip_special_tokens", True) is not False
        return (
            skipping
            and _LLAMA_SPECIAL.search(diff.vllm) is not None
            and _LLAMA_SPECIAL.sub("", diff.vllm) == diff.ours
        )
    # With a parser vLLM decodes with specials kept and its parser drops BOS and EOS
    # only; ours drops every special token that is not a marker.
    skipping = case.server != "off" or req.get("skip_special_tokens", True) is not False
    return skipping and len(diff.ours) < len(diff.vllm) and "<｜" in diff.vllm


def _hidden_reasoning_logprobs(case: Any, diff: Any) -> bool:
    """`include_reasoning: false` with logprobs: vLLM drops every logprob (and token id)
    of the choice; we drop those of the reasoning tokens only, so the answer's stay."""
    return (
        case.request.get("include_reasoning") is False
        and diff.path.endswith(".logprobs")
        and diff.vllm is None
        and isinstance(diff.ours, list)
    )


def _lax_unconstrained(case: Any, diff: Any) -> bool:
    """Strict tool calling off, tool_choice "required" / named, and an output that is
    not the JSON those modes constrain generation to (DSML, prose, the other mode's
    JSON) — unreachable under vLLM's guided decoding. vLLM then drops it (required:
    content "", no call) or passes it verbatim as the named call's arguments; we parse
    the model's own format, and keep prose as content."""
    choice = case.request.get("tool_choice")
    forced = "json-named" if isinstance(choice, dict) else "json-required"
    if not (
        case.server in ("lax", "llama-lax")
        and (choice == "required" or isinstance(choice, dict))
        and case.extra.get("shape") not in (None, forced)
    ):
        return False
    field = re.sub(r"^\.choices\.\d+\.(message\.)?", "", diff.path)
    if field in ("content", "finish_reason"):
        # Ours keeps the text, never the markup.
        ours = json.dumps(diff.ours, ensure_ascii=False)
        return "｜DSML｜" not in ours and PYTHON_TAG not in ours
    return field.startswith("tool_calls") or field == "order"


def _python_tag_in_content(case: Any, diff: Any) -> bool:
    """llama3_json, no call returned (tool_choice "none", no tools, or no JSON call after
    the tag): vLLM's legacy parser returns the raw text, `<|python_tag|>` included, as
    content; ours is the same text without the marker."""
    return (
        _llama_tools_chat(case)
        and _field(diff) == "content"
        and isinstance(diff.vllm, str)
        and PYTHON_TAG in diff.vllm
        and diff.vllm.replace(PYTHON_TAG, "") == diff.ours
    )


def _stream_no_call(case: Any, diff: Any) -> bool:
    """llama3_json, streaming: an output that starts like a call (`<|python_tag|>` or `{`)
    but is none. vLLM's streaming parser keeps waiting for JSON and sends nothing (its
    whole response returns the text as content); we stream it as content."""
    if not (case.stream and _llama_tools_chat(case) and _field(diff) == "content"):
        return False
    g = _gen(case, diff)
    tagged = g is not None and g.token_ids[:1] == [PYTHON_TAG_ID]
    ours = diff.ours
    return diff.vllm == "" and isinstance(ours, str) and (tagged or ours.startswith("{"))


# Shapes whose text comes before the call (prose, whitespace, the `[` of a JSON list).
TEXT_FIRST = ("prose-then-call", "brace-then-call", "json-required", "leading-space")


def _call_after_text(case: Any, diff: Any) -> bool:
    """llama3_json, a call after some text. vLLM's whole response finds the call anywhere
    and drops the text before it (content null, or "" for a forced choice) — unless that
    text holds a `{` that opens no JSON: then it gives up and returns everything as
    content, with no call. Its stream looks for a call only at the very start, so the
    text and the call's JSON are content and no call is made. We keep the text as content
    and make the call, both ways."""
    if not (_llama_tools_chat(case) and case.extra.get("shape") in TEXT_FIRST):
        return False
    field, v, o = _field(diff), diff.vllm, diff.ours
    if field == "content":
        if not isinstance(o, str) or '{"name"' in o:
            return False
        # vLLM: our text, then the call's JSON as text; or (whole) the text dropped
        raw = isinstance(v, str) and v.startswith(o) and '{"name"' in v[len(o) :]
        return raw or (not case.stream and v in (None, "") and o.strip() != "")
    if field == "tool_calls":  # whole, vLLM made no call
        return (
            v == []
            and isinstance(o, list)
            and len(o) > 0
            and all(_json_object(c.get("arguments")) for c in o)
        )
    if field == "finish_reason":
        return v in ("stop", ["stop"]) and o in ("tool_calls", ["tool_calls"])
    if not case.stream:
        return False
    if field == "order":
        return v == ["content"] and o in (["content", "tool:0"], ["tool:0"])
    return re.fullmatch(r"tool_calls\.\d+", field) is not None and v == "<absent>"


def _legacy_stream_chunks(case: Any, diff: Any) -> bool:
    """llama3_json streamed in chunks of several tokens: vLLM's streaming parser moves at
    most one step (new call, name, arguments) per chunk, and a chunk that completes a
    call together with text after it fails its partial-JSON parse; what such a chunk
    completes is lost — a call, its header, or its arguments' rest. Its whole response
    has every call; we stream every call, whole."""
    if not (case.stream and _llama_tools_chat(case)):
        return False
    if case.extra.get("shape") in TEXT_FIRST:
        return False
    g = _gen(case, diff)
    if g is None or not any(size > 1 for size in g.cuts or ()):
        return False
    field, v, o = _field(diff), diff.vllm, diff.ours
    if field == "finish_reason":
        return v == ["stop"] and o == ["tool_calls"]
    if field == "order":
        v_tools = [x for x in v if str(x).startswith("tool:")]
        o_tools = [x for x in o if str(x).startswith("tool:")]
        rest_v = [x for x in v if x not in v_tools]
        rest_o = [x for x in o if x not in o_tools]
        return rest_v == rest_o and set(v_tools) <= set(o_tools) and v != o
    m = re.fullmatch(r"tool_calls\.\d+(\.(\w+))?", field)
    if m is None:
        return False
    key = m.group(2)
    if key is None:
        return v == "<absent>" and _complete_call(o)
    if key == "arguments":
        return isinstance(v, str) and _json_object(o) and o.startswith(v) and v != o
    return (key, v) in (("name", ""), ("type", []), ("headers", 0)) and bool(o)


def _stream_empty_args(case: Any, diff: Any) -> bool:
    """llama3_json streaming, a call whose arguments are `{}`: vLLM's streaming parser
    sends argument text only for a non-empty object, so the call streams with `""` (its
    whole response says `"{}"`); we stream `{}`."""
    return (
        case.stream
        and _llama_tools_chat(case)
        and re.fullmatch(r"tool_calls\.\d+\.arguments", _field(diff)) is not None
        and diff.vllm == ""
        and diff.ours == "{}"
    )


def _cut_call(case: Any, diff: Any) -> bool:
    """llama3_json, the output ends inside a call (finish "length", or cut at a stop
    string): vLLM's whole response returns the raw text, markup included, as content and
    no call; its stream sends the header with the arguments it could complete (or, the
    call in one chunk, nothing). We send the call with its arguments as far as they were
    written, closed, both ways."""
    if not _llama_tools_chat(case):
        return False
    g = _gen(case, diff)
    if g is None or not (g.finish_reason == "length" or case.request.get("stop")):
        return False
    field, v, o = _field(diff), diff.vllm, diff.ours
    if field == "content":
        return o is None and isinstance(v, str) and '{"name"' in v
    if field == "tool_calls":  # whole: vLLM made no call; our last call is the cut one
        return v == [] and isinstance(o, list) and len(o) > 0
    if field == "finish_reason":
        return v == "stop" and o == "tool_calls"
    if re.fullmatch(r"tool_calls\.\d+", field):  # stream: vLLM never sent the cut call
        return v == "<absent>" and isinstance(o, dict) and bool(o.get("name"))
    if re.fullmatch(r"tool_calls\.\d+\.arguments", field):
        return _closed_where_cut(v, o)
    return False


def _invalid_arguments(case: Any, diff: Any) -> bool:
    """A JSON call list (llama3_json, hermes) whose arguments stop being JSON: vLLM's stream
    sends what its partial-JSON parser made of them (not JSON); ours are closed where they
    broke (json_check.py)."""
    if case.server not in (*LLAMA_TOOL_SERVERS, "qwen-hermes"):
        return False
    if not re.fullmatch(r"tool_calls\.\d+\.arguments", _field(diff)):
        return False
    v, o = diff.vllm, diff.ours
    return isinstance(v, str) and not _json_object(v) and _json_object(o)


# GLM-4.7, MiniMax M2, Qwen3 (cases_families.py). The servers whose tool parser runs on
# vLLM's parser engine, and those on its older per-model classes (hermes, and MiniMax's
# append-think reasoning, which keeps everything as content).
ENGINE_FAMILY_SERVERS = ("glm-on", "glm-lax", "minimax-on", "minimax-append", "qwen-coder")
LEGACY_FAMILY_SERVERS = ("qwen-hermes", "minimax-append")
APPEND_SERVER = "minimax-append"
END_THINK = "</think>"
MINIMAX_END_THINK_ID = 200051
# (MiniMax M3's block: `]<]minimax[>[<tool_call>` … `]<]minimax[>[</tool_call>`.)
_TOOL_BLOCK = (
    r"(?:(?:\]<\]minimax\[>\[)?<tool_call>.*?(?:</tool_call>|$)"
    r"|<minimax:tool_call>.*?(?:</minimax:tool_call>|$))"
)
# A run of tool-call blocks and the whitespace between them.
_TOOL_BLOCKS = re.compile(rf"{_TOOL_BLOCK}(?:\s*{_TOOL_BLOCK})*", re.S)


def _content_field(diff: Any) -> bool:
    return _field(diff) == "content" and isinstance(diff.vllm, str)


def _ours_as_vllm_append(case: Any, ours: Any) -> list[str]:
    """Our content, and — on the append-think server with tools — the same less the
    `</think>` vLLM drops there (`append-think-tools`): the other differences compare
    against either."""
    if not isinstance(ours, str):
        return []
    out = [ours]
    if case.server == APPEND_SERVER and case.request.get("tools") and END_THINK in ours:
        out.append(ours.replace(END_THINK, "", 1))
    return out


def _content_strip_with_tools(case: Any, diff: Any) -> bool:
    """vLLM's parser engine strips the content's surrounding whitespace in a whole response
    that has tool calls (`strip_content_whitespace_with_tools`, on for GLM, MiniMax M2 and
    qwen3_coder); its stream sends that whitespace. We keep it both ways."""
    if case.stream or case.server not in ENGINE_FAMILY_SERVERS or not _content_field(diff):
        return False
    if case.extra.get("shape") not in ("native", "text-between"):
        return False
    return any(
        o != diff.vllm and o.strip() == diff.vllm for o in _ours_as_vllm_append(case, diff.ours)
    )


def _text_after_call(case: Any, diff: Any) -> bool:
    """Text between and after tool calls (GLM, MiniMax M2, qwen3_coder): vLLM's whole
    response keeps only the text before the first call (stripped); its stream sends all
    of it; we send all of it both ways."""
    if case.stream or case.server not in ENGINE_FAMILY_SERVERS or not _content_field(diff):
        return False
    if case.extra.get("shape") != "text-between" or not diff.vllm:
        return False
    return any(
        o.strip().startswith(diff.vllm) and len(o.strip()) > len(diff.vllm)
        for o in _ours_as_vllm_append(case, diff.ours)
    )


def _ws_between_calls_stream(case: Any, diff: Any) -> bool:
    """The same parsers, streamed: the whitespace between two calls goes out as content;
    we drop a whitespace-only run between calls (the whole response has none of it)."""
    if not case.stream or case.server not in ENGINE_FAMILY_SERVERS or not _content_field(diff):
        return False
    if case.extra.get("shape") != "native":
        return False
    v = diff.vllm
    return any(
        v != o and v.startswith(o) and v[len(o) :].strip() == ""
        for o in _ours_as_vllm_append(case, diff.ours)
    )


def _text_after_call_either(case: Any, diff: Any) -> bool:
    return _text_after_call(case, diff) or _ws_between_calls_stream(case, diff)


def _unclosed_value(case: Any, diff: Any) -> bool:
    """A call cut short inside or right after a parameter's value (finish "length", or a
    stop string; GLM, MiniMax M2, qwen3_coder, MiniMax M3): vLLM's whole response drops
    that parameter, its stream sends the arguments up to the open value (invalid JSON;
    M3's stream drops it too); we close the value where the output stopped, both ways."""
    if case.extra.get("shape") != "cut" and case.server != M3_SERVER:
        return False
    if case.server not in (*ENGINE_FAMILY_SERVERS, M3_SERVER):
        return False
    if re.fullmatch(r"tool_calls(\.\d+|\[\d+\])\.arguments", _field(diff)) is None:
        return False
    v, o = diff.vllm, diff.ours
    if not _json_object(o):
        return False
    ours = json.loads(o)
    if not ours:
        return False
    last_key = list(ours)[-1]
    last = ours[last_key]
    # Our last value is what the model wrote, no piece of a closing tag.
    if isinstance(last, str) and re.search(r"<(/[A-Za-z_]*)?$", last):
        return False
    if _json_object(v):  # whole: vLLM dropped the open parameter
        return json.loads(v) == {k: x for k, x in ours.items() if k != last_key}
    return isinstance(v, str) and o.startswith(v) and v != o


def _tool_text_late(case: Any, diff: Any) -> bool:
    """Text between two calls that arrive in one chunk (GLM): vLLM's stream sends it after
    the next call's header, with that call's arguments; we send it before the call, in the
    order the model wrote it."""
    if not case.stream or case.server not in ENGINE_FAMILY_SERVERS or _field(diff) != "order":
        return False
    v, o = diff.vllm, diff.ours
    if not (isinstance(v, list) and isinstance(o, list)) or v == o:
        return False
    late = list(o)
    for i in range(1, len(late) - 1):
        tool_before = str(late[i - 1]).startswith("tool:")
        if late[i] == "content" and tool_before and str(late[i + 1]).startswith("tool:"):
            late[i], late[i + 1] = late[i + 1], late[i]
    collapsed = [x for i, x in enumerate(late) if i == 0 or late[i - 1] != x]
    return collapsed == v


def _shift_tools(order: Any, by: int) -> Any:
    if not isinstance(order, list):
        return None
    return [f"tool:{int(x[5:]) + by}" if str(x).startswith("tool:") else x for x in order]


def _unknown_tool_index(case: Any, diff: Any) -> bool:
    """A call of a function the request does not offer, dropped (GLM, MiniMax M2:
    `validate_tool_names`): vLLM's stream still counts it, so the next call streams as
    index 1 and index 0 is never sent; its whole response and ours number the kept calls
    from 0."""
    if not case.stream or case.extra.get("shape") != "unknown-name":
        return False
    field, v, o = _field(diff), diff.vllm, diff.ours
    if field == "order":
        return v == _shift_tools(o, 1) and v != o
    m = re.fullmatch(r"tool_calls\.(\d+)", field)
    if m is None:
        return False
    return (v == "<absent>" and _complete_call(o)) or (
        o == "<absent>" and int(m.group(1)) > 0 and _complete_call(v)
    )


def _append_think_tools(case: Any, diff: Any) -> bool:
    """`minimax_m2_append_think` with tools in the request: vLLM's content loses the
    model's `</think>` (its stream always, its whole response when a call was made); we
    keep the output verbatim, so the trace goes back into the conversation as written."""
    return (
        case.server == APPEND_SERVER
        and bool(case.request.get("tools"))
        and _content_field(diff)
        and isinstance(diff.ours, str)
        and END_THINK in diff.ours
        and diff.vllm == diff.ours.replace(END_THINK, "", 1)
    )


def _append_think_stream_no_end(case: Any, diff: Any) -> bool:
    """`minimax_m2_append_think`, a tool block with no `</think>` before it, streamed:
    vLLM's stream never parses tool calls (it waits for the reasoning to end), so the
    block goes out as content and no call is made; its whole response makes the call, and
    so do we, both ways."""
    g = _gen(case, diff)
    if not (case.stream and case.server == APPEND_SERVER and g is not None):
        return False
    if MINIMAX_END_THINK_ID in g.token_ids:
        return False
    field, v, o = _field(diff), diff.vllm, diff.ours
    if field == "content":
        return (
            isinstance(v, str)
            and isinstance(o, str)
            and v.startswith(o)
            and v[len(o) :].lstrip().startswith(("<minimax:tool_call>", "<invoke"))
        )
    if field == "finish_reason":
        return v == ["stop"] and o == ["tool_calls"]
    if field == "order":
        return v == ["content"] and isinstance(o, list) and o[:1] == ["content"] and len(o) > 1
    return (
        re.fullmatch(r"tool_calls\.\d+", field) is not None
        and v == "<absent>"
        and _complete_call(o)
    )


def _tool_markup_in_content(case: Any, diff: Any) -> bool:
    """tool_choice "none" or no tools, with hermes, MiniMax's append-think or MiniMax M3:
    vLLM returns the tool-call markup as content; ours is the same text without the markup
    (M3 streamed without thinking enabled: and without the think markup vLLM's stream
    passes as content too, `m3-stream-think-as-content`)."""
    req = case.request
    if case.server not in MARKUP_IN_CONTENT_SERVERS or not _content_field(diff):
        return False
    if req.get("tools") and req.get("tool_choice") != "none":
        return False
    views = [diff.vllm]
    if case.server == M3_SERVER and case.stream and not _m3_enabled(case):
        views.append(_m3_unthink(diff.vllm))
    return any(
        _TOOL_BLOCKS.search(v) is not None and _TOOL_BLOCKS.sub("", v) == (diff.ours or "")
        for v in views
    )


def _hermes_stream_whitespace(case: Any, diff: Any) -> bool:
    """hermes, streamed: the whitespace between the reasoning and the first `<tool_call>`
    goes out as content; vLLM's whole response says null (whitespace-only content before
    calls is dropped); we send none."""
    return (
        case.stream
        and case.server == "qwen-hermes"
        and _content_field(diff)
        and diff.ours == ""
        and diff.vllm != ""
        and diff.vllm.strip() == ""
    )


def _hermes_think_end_in_content(case: Any, diff: Any) -> bool:
    """qwen3 with hermes, thinking on, a `</think>` after the reasoning has ended: vLLM's
    stream sends it as content text; its whole response (and qwen3_coder, both ways) drop
    it as the stray end marker it is; we drop it both ways."""
    kwargs = case.request.get("chat_template_kwargs") or {}
    return (
        case.stream
        and case.server == "qwen-hermes"
        and kwargs.get("enable_thinking") is not False
        and _content_field(diff)
        and END_THINK in diff.vllm
        and diff.vllm.replace(END_THINK, "") == diff.ours
    )


def _think_end_when_off(case: Any, diff: Any) -> bool:
    """Qwen3 with thinking off (`enable_thinking: false`), a `</think>` in the output:
    vLLM's qwen3_coder drops it (and so does its hermes stream, with some chunkings) while
    keeping a `<think>`; its hermes whole response keeps it. Thinking off, we keep the
    output verbatim: the markers are text."""
    kwargs = case.request.get("chat_template_kwargs") or {}
    return (
        case.server in ("qwen-coder", "qwen-hermes")
        and kwargs.get("enable_thinking") is False
        and _content_field(diff)
        and isinstance(diff.ours, str)
        and END_THINK in diff.ours
        and diff.ours.replace(END_THINK, "") == diff.vllm
    )


def _hermes_cut_call(case: Any, diff: Any) -> bool:
    """hermes, a call cut short (length): vLLM's whole response returns the raw text,
    markup included, as content and no call; its stream sends the call with the arguments
    as far as they were written (open JSON); we send the call both ways, its arguments
    closed."""
    g = _gen(case, diff)
    if case.server != "qwen-hermes" or g is None or g.finish_reason != "length":
        return False
    field, v, o = _field(diff), diff.vllm, diff.ours
    if case.stream:
        return bool(re.fullmatch(r"tool_calls\.\d+\.arguments", field)) and _closed_where_cut(v, o)
    if field == "content":
        return isinstance(v, str) and "<tool_call>" in v and (o is None or v.startswith(o))
    if field == "tool_calls":
        return v == [] and isinstance(o, list) and len(o) > 0
    return False


_FFFD = "\ufffd"
_FFFD_BYTES = [239, 191, 189]


def _logprob_char_inside(case: Any, diff: Any) -> bool:
    """A logprob token that starts with the last bytes of a character the previous token
    began and goes on (byte-level BPE: `Ńå·ŀ` = the end of 杭 + 州): vLLM repairs only a
    U+FFFD at a token's end, so it says `�州`; ours is what the text grew by, `杭州`
    (the first token, holding the character's first bytes, is `""` on both sides)."""
    v, o = diff.vllm, diff.ours
    if re.search(r"\.logprobs\[\d+\](\.top_logprobs\[\d+\])?\.token$", diff.path):
        return _char_inside(v, o)
    if re.search(r"\.logprobs\[\d+\](\.top_logprobs\[\d+\])?\.bytes$", diff.path):
        return (
            isinstance(v, list)
            and isinstance(o, list)
            and v[:3] == _FFFD_BYTES
            and len(o) > len(v) - 3
            and o[len(o) - len(v) + 3 :] == v[3:]
        )
    # Completion logprobs: the token list, and a position's candidates (text → logprob).
    if diff.path.endswith(".logprobs.tokens"):
        return _pairwise(v, o)
    if re.search(r"\.logprobs\.top_logprobs\[\d+\]$", diff.path):
        return (
            isinstance(v, dict)
            and isinstance(o, dict)
            and list(v.values()) == list(o.values())
            and _pairwise(list(v), list(o))
        )
    return False


def _char_inside(v: Any, o: Any) -> bool:
    return (
        isinstance(v, str)
        and isinstance(o, str)
        and v.startswith(_FFFD)
        and _FFFD not in o
        and len(o) > len(v) - 1
        and o.endswith(v[1:])
    )


def _pairwise(v: Any, o: Any) -> bool:
    """Two token-text lists that differ, and only where vLLM says `�…` for our char."""
    if not (isinstance(v, list) and isinstance(o, list) and len(v) == len(o) and v != o):
        return False
    return all(a == b or _char_inside(a, b) for a, b in zip(v, o, strict=True))


# gpt-oss (Harmony; cases_gptoss.py): its servers, and the id of `<|start|>`, which opens
# every message after the first.
GPTOSS_SERVERS = ("gptoss-on", "gptoss-reasoning")
HARMONY_START_ID = 200006


def _newlines_put_back(ours: str, theirs: str) -> int | None:
    """How many "\n" `ours` has that `theirs` lacks, when that is all that differs
    (None otherwise)."""
    j = extra = 0
    for c in ours:
        if j < len(theirs) and c == theirs[j]:
            j += 1
        elif c == "\n":
            extra += 1
        else:
            return None
    return extra if j == len(theirs) else None


def _harmony_stream_join(case: Any, diff: Any) -> bool:
    """gpt-oss, several reasoning (or content: a preamble and the answer) messages: vLLM's
    whole response joins their texts with "\n", its stream sends them back to back
    ("First.Second."); we join with "\n" both ways. At most one "\n" per message after
    the first (each opens with `<|start|>`)."""
    if not case.stream or case.server not in GPTOSS_SERVERS:
        return False
    if _field(diff) not in ("content", "reasoning"):
        return False
    v, o, g = diff.vllm, diff.ours, _gen(case, diff)
    if not (isinstance(v, str) and isinstance(o, str)) or g is None:
        return False
    extra = _newlines_put_back(o, v)
    return extra is not None and 0 < extra <= g.token_ids.count(HARMONY_START_ID)


def _harmony_raw_arguments(case: Any, diff: Any) -> bool:
    """gpt-oss, a call's JSON arguments: vLLM's whole response re-serializes them
    (`json.dumps`: `{"a": 1}` spacing, non-ASCII as \\uXXXX), its stream sends them as the
    model wrote them; we send them as written both ways."""
    if case.stream or case.server not in GPTOSS_SERVERS:
        return False
    if re.fullmatch(r"tool_calls\[\d+\]\.arguments", _field(diff)) is None:
        return False
    v, o = diff.vllm, diff.ours
    if not (isinstance(v, str) and isinstance(o, str)) or v == o:
        return False
    try:
        return json.dumps(json.loads(o)) == v
    except ValueError:
        return False


DIFFERENCES: list[Difference] = [
    Difference(
        "stream-stop",
        "Streaming with `stop`: vLLM answers 400; we hold back and cut at the stop string",
        _stream_stop,
    ),
    Difference(
        "stream-opening",
        "Chat streams open with a role chunk per choice (vLLM's chat server's opening)",
        _stream_opening,
    ),
    Difference(
        "usage-at-end",
        "include_usage with no engine usage event: vLLM sends no usage chunk; we compute it",
        _usage_at_end,
    ),
    Difference(
        "completion-echo",
        "Completion `echo`: vLLM's derender ignores it; we prepend the prompt text",
        _echo,
    ),
    Difference(
        "stop-after-length",
        'Whole response ending "length" with a stop string inside: vLLM keeps it; we cut',
        _stop_after_length,
    ),
    Difference(
        "partial-char-at-end",
        "Output ending inside a UTF-8 character: vLLM drops the bytes; we flush U+FFFD",
        _partial_char_at_end,
    ),
    Difference(
        "stream-logprob-bound",
        "Streaming: vLLM does not bound top_logprobs per position; we refuse > max_logprobs",
        _error_we_raise("top-logprobs-bound", stream_only=True),
    ),
    Difference(
        "out-of-vocab",
        "Token ids outside the vocabulary: vLLM decodes them as nothing; we refuse the request",
        _error_we_raise("out-of-vocab", stream_only=False),
    ),
    Difference(
        "python-tag-in-content",
        "llama3_json, no call returned: vLLM's content keeps `<|python_tag|>`; we drop the marker",
        _python_tag_in_content,
    ),
    Difference(
        "special-skip-set",
        "skip_special_tokens / parser path: vLLM's derender keeps special tokens we drop",
        _special_skip_set,
    ),
    Difference(
        "lax-unconstrained-output",
        "Strict off, forced tool choice, output not the constrained JSON: vLLM drops it",
        _lax_unconstrained,
    ),
    Difference(
        "lax-required-stream",
        "Strict tool calling off, required, small chunks: vLLM streams no call (its bug)",
        _lax_required_stream,
    ),
    Difference(
        "hidden-reasoning-logprobs",
        "include_reasoning false: vLLM drops all logprobs; we drop the reasoning tokens' only",
        _hidden_reasoning_logprobs,
    ),
    Difference(
        "llama-call-after-text",
        "llama3_json call after text: vLLM drops the text (whole) or makes no call (stream)",
        _call_after_text,
    ),
    Difference(
        "llama-stream-no-call",
        "llama3_json stream starting like a call but none: vLLM sends nothing; we send content",
        _stream_no_call,
    ),
    Difference(
        "llama-stream-chunks",
        "llama3_json streamed in multi-token chunks: vLLM loses calls, names or argument text",
        _legacy_stream_chunks,
    ),
    Difference(
        "llama-stream-empty-args",
        'llama3_json stream, a call with `{}` arguments: vLLM streams `""`; we stream `{}`',
        _stream_empty_args,
    ),
    Difference(
        "llama-cut-call",
        "llama3_json call cut short: vLLM returns the raw text or an empty call; we send it",
        _cut_call,
    ),
    Difference(
        "invalid-arguments",
        "JSON call list, arguments that stop being JSON: vLLM sends them broken; we close them",
        _invalid_arguments,
    ),
    Difference(
        "content-strip-with-tools",
        "Whole response with tool calls: vLLM strips the content's whitespace; we keep it",
        _content_strip_with_tools,
    ),
    Difference(
        "text-after-call",
        "Text between or after tool calls: vLLM's whole response drops it; we keep it",
        _text_after_call_either,
    ),
    Difference(
        "tool-text-late",
        "Text between two calls in one chunk: vLLM streams it after the next call's header",
        _tool_text_late,
    ),
    Difference(
        "unclosed-value",
        "A call cut inside a value: vLLM drops the value (whole), sends invalid JSON (stream)",
        _unclosed_value,
    ),
    Difference(
        "unknown-tool-index",
        "A call to an unknown function, dropped: vLLM streams the next call as index 1",
        _unknown_tool_index,
    ),
    Difference(
        "append-think-tools",
        "minimax_m2_append_think with tools: vLLM drops the model's `</think>`; we keep it",
        _append_think_tools,
    ),
    Difference(
        "append-think-stream-no-end",
        "append-think stream, a call with no `</think>` before it: vLLM makes no call",
        _append_think_stream_no_end,
    ),
    Difference(
        "tool-markup-in-content",
        "hermes / append-think, no tools or tool_choice none: vLLM's content keeps the markup",
        _tool_markup_in_content,
    ),
    Difference(
        "hermes-stream-whitespace",
        "hermes stream: vLLM sends the whitespace before the first call as content",
        _hermes_stream_whitespace,
    ),
    Difference(
        "hermes-think-end-in-content",
        "qwen3 + hermes stream: vLLM sends a `</think>` after the reasoning as content",
        _hermes_think_end_in_content,
    ),
    Difference(
        "think-end-when-off",
        "Qwen3, thinking off, `</think>` in the output: vLLM (qwen3_coder) drops it; we keep it",
        _think_end_when_off,
    ),
    Difference(
        "hermes-cut-call",
        "hermes, a call cut short: vLLM's whole response returns the raw markup as content",
        _hermes_cut_call,
    ),
    Difference(
        "logprob-char-inside",
        "Logprob token ending a split character and going on: vLLM says `�…`; we give the char",
        _logprob_char_inside,
    ),
    Difference(
        "harmony-stream-join",
        'gpt-oss, several reasoning or content messages: vLLM streams them unjoined; we add "\\n"',
        _harmony_stream_join,
    ),
    Difference(
        "harmony-raw-arguments",
        "gpt-oss whole response: vLLM re-serializes JSON arguments; we keep the model's text",
        _harmony_raw_arguments,
    ),
]

# gpt-oss: the text of the EOS ids, as vLLM's Harmony path decodes them.
HARMONY_EOS_TEXT = {200002: "<|return|>", 199999: "<|endoftext|>", 200012: "<|call|>"}


def _any_field(diff: Any) -> str:
    """_field, also for compare_to_whole's paths (`whole.choices.0.content`)."""
    return re.sub(r"^(whole)?\.?choices\.\d+\.(message\.)?", "", diff.path)


def _harmony_eos_text(case: Any, diff: Any) -> bool:
    """gpt-oss, the output's last id an EOS that the Harmony parser reads as text (an
    `<|endoftext|>` ending an answer's body, or any EOS after an unfinished header, which
    vLLM's recovery decodes with special tokens kept): vLLM's content ends with the EOS's
    text (`Hi<|endoftext|>`, `Hello, no header.<|return|>`, `<|return|>` alone); ours is
    the same text without it (null when nothing is left)."""
    g = _gen(case, diff)
    if case.server not in GPTOSS_SERVERS or g is None or not g.token_ids:
        return False
    if _field(diff) not in ("content", "reasoning") or not isinstance(diff.vllm, str):
        return False
    eos = HARMONY_EOS_TEXT.get(g.token_ids[-1])
    if eos is None or not diff.vllm.endswith(eos):
        return False
    v, o = diff.vllm[: -len(eos)], diff.ours
    if o is None or o == "":
        return v == ""
    if not isinstance(o, str):
        return False
    if v == o:
        return True
    # streamed, with several messages: our "\n" between them too (harmony-stream-join)
    extra = _newlines_put_back(o, v) if case.stream else None
    return extra is not None and 0 < extra <= g.token_ids.count(HARMONY_START_ID)


def _harmony_stop(case: Any, diff: Any) -> bool:
    """gpt-oss with `stop` or `stop_token_ids`: vLLM's Harmony parser reads every id the
    engine sent, so the answer (reasoning, content, arguments) keeps the stop string and
    a stop token's text, and an unreported stop string is never looked for; we cut at the
    stop string and drop the stop token, as for every other model (and as vLLM does for
    them)."""
    req = case.request
    if case.server not in GPTOSS_SERVERS or not (req.get("stop") or req.get("stop_token_ids")):
        return False
    field, v, o = _any_field(diff), diff.vllm, diff.ours
    if field in ("content", "reasoning"):
        o = o or ""
        return isinstance(v, str) and isinstance(o, str) and v != o and v.startswith(o)
    if re.fullmatch(r"tool_calls(\.\d+|\[\d+\])\.arguments", field):
        o = o or ""
        return isinstance(v, str) and isinstance(o, str) and v != o and _as_written(v).startswith(o)
    if field == "tool_calls":  # compare_to_whole: [(name, arguments)] per call
        return (
            isinstance(v, list)
            and isinstance(o, list)
            and len(v) == len(o)
            and v != o
            and all(
                a[0] == b[0] and _as_written(a[1]).startswith(str(b[1]))
                for a, b in zip(v, o, strict=True)
            )
        )
    return False


def _as_written(arguments: Any) -> str:
    """vLLM's whole-response arguments without its re-serialization (`harmony-raw-arguments`:
    `json.dumps` spacing and `\\uXXXX`), so a stop-string cut of the model's own text can be
    recognised as its prefix."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _harmony_reserved_name(case: Any, diff: Any) -> bool:
    """gpt-oss, id 200018 inside a message body: vLLM's Harmony path names it as
    openai-harmony does, `<|reserved_200018|>`; we decode it with the tokenizer, whose name
    for it (and gpt-oss's tokenizer_config.json's, and vLLM's own completion text's) is
    `<|endofprompt|>`."""
    if case.server not in GPTOSS_SERVERS or _field(diff) not in ("content", "reasoning"):
        return False
    v, o = diff.vllm, diff.ours
    return (
        isinstance(v, str)
        and isinstance(o, str)
        and "<|reserved_200018|>" in v
        and v.replace("<|reserved_200018|>", "<|endofprompt|>") == o
    )


# Accepted after `make parity` found them (their matchers are defined above).
DIFFERENCES += [
    Difference(
        "harmony-eos-text",
        "gpt-oss, an EOS id the Harmony parser reads as text: vLLM's content keeps its text",
        _harmony_eos_text,
    ),
    Difference(
        "harmony-reserved-name",
        "gpt-oss, id 200018 in a body: vLLM says `<|reserved_200018|>`; we `<|endofprompt|>`",
        _harmony_reserved_name,
    ),
    Difference(
        "harmony-stop",
        "gpt-oss with stop strings / stop_token_ids: vLLM's Harmony answer is never cut",
        _harmony_stop,
    ),
]

# MiniMax M3 (cases_minimax_m3.py): its server, its think markers, the EOS text that ends
# a `stop` case's decoded output.
M3_SERVER = "minimax_m3-on"
M3_THINK, M3_END_THINK = "<mm:think>", "</mm:think>"
M3_TOOL_START = "]<]minimax[>[<tool_call>"
M3_EOS_TEXT = "[e~["
MARKUP_IN_CONTENT_SERVERS = (*LEGACY_FAMILY_SERVERS, M3_SERVER)
_M3_BLOCK = re.compile(re.escape(M3_THINK) + r".*?(?:" + re.escape(M3_END_THINK) + r"|$)", re.S)


def _m3_chat(case: Any) -> bool:
    return case.server == M3_SERVER and case.api == "chat"


def _m3_enabled(case: Any) -> bool:
    kwargs = case.request.get("chat_template_kwargs") or {}
    return kwargs.get("thinking_mode") == "enabled"


def _m3_text(case: Any, diff: Any) -> str | None:
    """The output text of the choice a diff is about (`cases_minimax_m3.mark_texts`), less
    the EOS text."""
    m = _CHOICE.match(diff.path)
    text = (case.extra.get("texts") or {}).get(m.group(1) if m else "0")
    return text.removesuffix(M3_EOS_TEXT) if isinstance(text, str) else None


def _m3_unthink(text: str) -> str:
    """Text less every think block (closed, or open to the end) and stray end marker."""
    return _M3_BLOCK.sub("", text).replace(M3_END_THINK, "")


def _m3_reasoning(text: str, enabled: bool) -> str:
    """Our reasoning for an M3 output: every think block's text (the first one open from
    the start when thinking is enabled; an opener inside a block is dropped)."""
    out, at, inside = [], 0, enabled
    while True:
        if inside:
            end = text.find(M3_END_THINK, at)
            out.append(text[at : end if end >= 0 else len(text)].replace(M3_THINK, ""))
            if end < 0:
                break
            at, inside = end + len(M3_END_THINK), False
        else:
            start = text.find(M3_THINK, at)
            if start < 0:
                break
            at, inside = start + len(M3_THINK), True
    return "".join(out)


def _m3_stream_think_as_content(case: Any, diff: Any) -> bool:
    """MiniMax M3 streamed without `thinking_mode: "enabled"`: the real chat template's
    system prompt names the markers (`<mm:think></mm:think>`), vLLM's streaming reasoning
    parser scans the prompt, finds an end marker and decides the reasoning is over — so
    the whole stream is content, think markers included, and a call block inside an
    unclosed think block is parsed as a call. Its whole response separates the blocks. We
    separate them both ways (the stream equals the whole response)."""
    if not (case.stream and _m3_chat(case)) or _m3_enabled(case):
        return False
    text = _m3_text(case, diff)
    if text is None or (M3_THINK not in text and M3_END_THINK not in text):
        return False
    field, v, o = _field(diff), diff.vllm, diff.ours
    if field == "content":
        return isinstance(v, str) and isinstance(o, str) and v != o and _m3_unthink(v) == o
    if field == "reasoning":
        return v == "" and isinstance(o, str) and o != "" and o == _m3_reasoning(text, False)
    # A call block inside an unclosed think block: vLLM's stream calls it.
    if M3_TOOL_START not in _m3_reasoning(text, False):
        return False
    if field == "finish_reason":
        return v == ["tool_calls"] and o in (["stop"], ["length"])
    return (
        re.fullmatch(r"tool_calls\.\d+", field) is not None
        and o == "<absent>"
        and isinstance(v, dict)
        and bool(v.get("name"))
    )


def _m3_stray_think_end(case: Any, diff: Any) -> bool:
    """MiniMax M3, a `</mm:think>` in the content that does not start the output (or,
    thinking enabled, after the one ending the reasoning): vLLM keeps it as text (it drops
    only a closer the output starts with); we drop it."""
    if not _m3_chat(case) or not _content_field(diff) or not isinstance(diff.ours, str):
        return False
    v = diff.vllm
    return M3_END_THINK in v and M3_THINK not in v and v.replace(M3_END_THINK, "") == diff.ours


def _m3_second_think_block(case: Any, diff: Any) -> bool:
    """MiniMax M3, a second think block: vLLM reads only the first as reasoning and keeps
    the later ones verbatim in the content; we read every block as reasoning (joined)."""
    if not _m3_chat(case) or (case.stream and not _m3_enabled(case)):
        return False
    text = _m3_text(case, diff)
    if text is None:
        return False
    enabled = _m3_enabled(case)
    if text.count(M3_THINK) < (1 if enabled else 2):
        return False
    field, v, o = _field(diff), diff.vllm, diff.ours
    if field == "content":
        return isinstance(v, str) and M3_THINK in v and _m3_unthink(v) == (o or "")
    if field == "reasoning":
        v = v or ""
        return (
            isinstance(o, str) and o != v and o.startswith(v) and o == _m3_reasoning(text, enabled)
        )
    return False


def _m3_enabled_text_before_opener(case: Any, diff: Any) -> bool:
    """MiniMax M3 with `thinking_mode: "enabled"` (the prompt ends `<mm:think>`), an output
    that writes `<mm:think>` after some text: vLLM makes the text before it content (as if
    no block had been open); we keep it in the reasoning the prompt opened, and drop the
    repeated opener."""
    if not (_m3_chat(case) and _m3_enabled(case)):
        return False
    text = _m3_text(case, diff)
    if text is None or M3_THINK not in text:
        return False
    pre = text[: text.index(M3_THINK)]
    if not pre or M3_END_THINK in pre:
        return False
    field, v, o = _field(diff), diff.vllm or "", diff.ours or ""
    if field == "content":
        return v == pre + o
    if field == "reasoning":
        return o == pre + v
    return False


def _m3_arguments(case: Any, diff: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """vLLM's and our arguments of an M3 call as objects with the same keys, when they
    differ (None otherwise)."""
    if not _m3_chat(case):
        return None
    if re.fullmatch(r"tool_calls(\.\d+|\[\d+\])\.arguments", _field(diff)) is None:
        return None
    if not (_json_object(diff.vllm) and _json_object(diff.ours)):
        return None
    theirs, ours = json.loads(diff.vllm), json.loads(diff.ours)
    if list(theirs) != list(ours) or theirs == ours:
        return None
    return theirs, ours


def _m3_repeated_parameter(case: Any, diff: Any) -> bool:
    """MiniMax M3, a parameter element written more than once: vLLM's arguments hold a
    list of the values; ours the first (each parameter goes out as it closes)."""
    pair = _m3_arguments(case, diff)
    if pair is None:
        return False
    theirs, ours = pair
    return all(
        theirs[k] == ours[k]
        or (isinstance(theirs[k], list) and len(theirs[k]) > 1 and theirs[k][0] == ours[k])
        for k in theirs
    )


_M3_CUT_NAME = re.compile(r"<invoke name=[\"']?([^\"'>]*)$")


def _m3_cut_in_name(case: Any, diff: Any) -> bool:
    """MiniMax M3, an output cut (length) inside a function's name: vLLM returns a call
    named with the part written (`get_wea`, arguments `{}`); we make no call of it (the
    name is not known yet)."""
    g = _gen(case, diff)
    if not _m3_chat(case) or g is None or g.finish_reason != "length":
        return False
    text = _m3_text(case, diff)
    m = _M3_CUT_NAME.search(text or "")
    if m is None:
        return False
    name = m.group(1)

    def cut_call(call: Any) -> bool:
        return isinstance(call, dict) and call.get("name") == name and call.get("arguments") == "{}"

    field, v, o = _field(diff), diff.vllm, diff.ours
    if field == "tool_calls":  # whole: our calls are vLLM's less the cut one
        return isinstance(v, list) and bool(v) and cut_call(v[-1]) and o == v[:-1]
    if field == "order":
        return isinstance(v, list) and isinstance(o, list) and v[:-1] == o and v[-1:] != o[-1:]
    return re.fullmatch(r"tool_calls\.\d+", field) is not None and o == "<absent>" and cut_call(v)


def _m3_stream_partial_end(case: Any, diff: Any) -> bool:
    """MiniMax M3 streamed, thinking enabled, the output cut (length) inside the reasoning's
    end marker (`abc</mm:th`): vLLM's stream holds the partial marker back and never sends
    it (its whole response keeps it in the reasoning); we send it (the stream equals the
    whole response)."""
    g = _gen(case, diff)
    if not (case.stream and _m3_chat(case) and _m3_enabled(case)) or g is None:
        return False
    if g.finish_reason != "length" or _field(diff) != "reasoning":
        return False
    v, o = diff.vllm, diff.ours
    if not (isinstance(v, str) and isinstance(o, str) and o.startswith(v) and o != v):
        return False
    return M3_END_THINK.startswith(o[len(v) :])


DIFFERENCES += [
    Difference(
        "m3-stream-think-as-content",
        "MiniMax M3 stream, thinking not enabled: vLLM sends the think blocks as content",
        _m3_stream_think_as_content,
    ),
    Difference(
        "stray-think-end",
        "MiniMax M3, a `</mm:think>` inside the content: vLLM keeps it as text; we drop it",
        _m3_stray_think_end,
    ),
    Difference(
        "m3-second-think-block",
        "MiniMax M3, a second think block: vLLM keeps it in the content; we read it as reasoning",
        _m3_second_think_block,
    ),
    Difference(
        "m3-enabled-text-before-opener",
        "MiniMax M3 thinking enabled, text then `<mm:think>`: vLLM makes that text content",
        _m3_enabled_text_before_opener,
    ),
    Difference(
        "m3-repeated-parameter",
        "MiniMax M3, a parameter element written twice: vLLM makes a list; we keep the first",
        _m3_repeated_parameter,
    ),
    Difference(
        "cut-name",
        "MiniMax M3, output cut inside a function name: vLLM returns a call `get_wea`; we none",
        _m3_cut_in_name,
    ),
    Difference(
        "m3-stream-partial-end",
        "MiniMax M3 stream cut inside `</mm:think>`: vLLM never sends the partial marker",
        _m3_stream_partial_end,
    ),
]

# Observed, and possibly deliberate on our side, but not (yet) accepted: they still fail
# a case. A failing case's report names the proposal that would explain it; moving an
# entry into DIFFERENCES (and a row into README.md's table) accepts it.
PROPOSED: list[Difference] = []


def _http_only(case: Any, diff: Any) -> bool:
    """`serve`'s differences at the HTTP level (the carried state, its binding, body
    limits, messages, null fields): tests/serve pins them; the body parities compare
    after the normalisation that makes them vanish, so no body diff is explained here."""
    return False


DIFFERENCES += [
    Difference(
        "serve-stream-state", "serve: stream_state is our sealed request state (~200 B)", _http_only
    ),
    Difference(
        "serve-state-bound", "serve: a state of another request, or altered: 400", _http_only
    ),
    Difference(
        "serve-null-fields", "serve: fields vLLM writes as null / [] are left out", _http_only
    ),
    Difference(
        "serve-created", "serve: a stream's chunks carry its first call's `created`", _http_only
    ),
    Difference("serve-body-limit", "serve: a body over --max-body-bytes is a 413", _http_only),
    Difference(
        "serve-stream-bound", "serve: the chunk and the prompt bounded, not their sum", _http_only
    ),
    Difference(
        "serve-error-messages", "serve: the core's error messages, msgspec's validation", _http_only
    ),
    Difference("serve-empty-chunk", "serve: a call with nothing to say: delta {}", _http_only),
    Difference("serve-models", "serve: /v1/models card root is the served name", _http_only),
]

BY_ID = {d.id: d for d in DIFFERENCES}


def explain(
    case: Any, diffs: list[Any], among: list[Difference] = DIFFERENCES
) -> tuple[list[str], list[Any]]:
    """The ids explaining some of `diffs`, and the diffs nothing explains."""
    used: list[str] = []
    unexplained = []
    for d in diffs:
        hit = next((x for x in among if x.explains(case, d)), None)
        if hit is None:
            unexplained.append(d)
        elif hit.id not in used:
            used.append(hit.id)
    return used, unexplained
