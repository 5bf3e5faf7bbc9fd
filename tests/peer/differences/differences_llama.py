"""Llama 3.2's llama3_json tool parser (cases_llama.py): vLLM's legacy parser drops text,
loses calls in multi-token chunks and leaves cut calls raw; we do not.

Imports nothing of the project but its other `differences_*` modules: it is read by a
test that runs without vLLM or httpx.
"""

from __future__ import annotations

import re
from typing import Any

from tests.peer.differences.differences_base import (
    Difference,
    closed_where_cut,
    complete_call,
    field_of,
    generated,
    json_object,
)

# Llama 3.2: the servers with the llama3_json tool parser, its call marker, and the text of
# its special tokens (`<|eot_id|>`, `<|reserved_special_token_2|>`, …).
LLAMA_TOOL_SERVERS = ("llama-tools", "llama-lax")
PYTHON_TAG = "<|python_tag|>"
PYTHON_TAG_ID = 128010
LLAMA_SPECIAL = re.compile(r"<\|[a-z0-9_]+\|>")


def llama_tools_chat(case: Any) -> bool:
    return case.api == "chat" and case.server in LLAMA_TOOL_SERVERS


def python_tag_in_content(case: Any, diff: Any) -> bool:
    """llama3_json, no call returned (tool_choice "none", no tools, or no JSON call after
    the tag): vLLM's legacy parser returns the raw text, `<|python_tag|>` included, as
    content; ours is the same text without the marker."""
    return (
        llama_tools_chat(case)
        and field_of(diff) == "content"
        and isinstance(diff.vllm, str)
        and PYTHON_TAG in diff.vllm
        and diff.vllm.replace(PYTHON_TAG, "") == diff.ours
    )


def _stream_no_call(case: Any, diff: Any) -> bool:
    """llama3_json, streaming: an output that starts like a call (`<|python_tag|>` or `{`)
    but is none. vLLM's streaming parser keeps waiting for JSON and sends nothing (its
    whole response returns the text as content); we stream it as content."""
    if not (case.stream and llama_tools_chat(case) and field_of(diff) == "content"):
        return False
    g = generated(case, diff)
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
    if not (llama_tools_chat(case) and case.extra.get("shape") in TEXT_FIRST):
        return False
    field, v, o = field_of(diff), diff.vllm, diff.ours
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
            and all(json_object(c.get("arguments")) for c in o)
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
    if not (case.stream and llama_tools_chat(case)):
        return False
    if case.extra.get("shape") in TEXT_FIRST:
        return False
    g = generated(case, diff)
    if g is None or not any(size > 1 for size in g.cuts or ()):
        return False
    field, v, o = field_of(diff), diff.vllm, diff.ours
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
        return v == "<absent>" and complete_call(o)
    if key == "arguments":
        return isinstance(v, str) and json_object(o) and o.startswith(v) and v != o
    return (key, v) in (("name", ""), ("type", []), ("headers", 0)) and bool(o)


def _stream_empty_args(case: Any, diff: Any) -> bool:
    """llama3_json streaming, a call whose arguments are `{}`: vLLM's streaming parser
    sends argument text only for a non-empty object, so the call streams with `""` (its
    whole response says `"{}"`); we stream `{}`."""
    return (
        case.stream
        and llama_tools_chat(case)
        and re.fullmatch(r"tool_calls\.\d+\.arguments", field_of(diff)) is not None
        and diff.vllm == ""
        and diff.ours == "{}"
    )


def _cut_call(case: Any, diff: Any) -> bool:
    """llama3_json, the output ends inside a call (finish "length", or cut at a stop
    string): vLLM's whole response returns the raw text, markup included, as content and
    no call; its stream sends the header with the arguments it could complete (or, the
    call in one chunk, nothing). We send the call with its arguments as far as they were
    written, closed, both ways."""
    if not llama_tools_chat(case):
        return False
    g = generated(case, diff)
    if g is None or not (g.finish_reason == "length" or case.request.get("stop")):
        return False
    field, v, o = field_of(diff), diff.vllm, diff.ours
    if field == "content":
        return o is None and isinstance(v, str) and '{"name"' in v
    if field == "tool_calls":  # whole: vLLM made no call; our last call is the cut one
        return v == [] and isinstance(o, list) and len(o) > 0
    if field == "finish_reason":
        return v == "stop" and o == "tool_calls"
    if re.fullmatch(r"tool_calls\.\d+", field):  # stream: vLLM never sent the cut call
        return v == "<absent>" and isinstance(o, dict) and bool(o.get("name"))
    if re.fullmatch(r"tool_calls\.\d+\.arguments", field):
        return closed_where_cut(v, o)
    return False


def _invalid_arguments(case: Any, diff: Any) -> bool:
    """A JSON call list (llama3_json, hermes) whose arguments stop being JSON: vLLM's stream
    sends what its partial-JSON parser made of them (not JSON); ours are closed where they
    broke (json_check.py)."""
    if case.server not in (*LLAMA_TOOL_SERVERS, "qwen-hermes"):
        return False
    if not re.fullmatch(r"tool_calls\.\d+\.arguments", field_of(diff)):
        return False
    v, o = diff.vllm, diff.ours
    return isinstance(v, str) and not json_object(v) and json_object(o)


PYTHON_TAG_IN_CONTENT = Difference(
    "python-tag-in-content",
    "llama3_json, no call returned: vLLM's content keeps `<|python_tag|>`; we drop the marker",
    python_tag_in_content,
)

LLAMA: list[Difference] = [
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
]
