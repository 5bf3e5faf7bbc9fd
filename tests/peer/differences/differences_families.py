"""GLM-4.7, MiniMax M2 and Qwen3 (cases_families.py): vLLM's parser engine and its older
per-model classes (hermes, MiniMax's append-think) around tool calls and `</think>`.

Imports nothing of the project but its other `differences_*` modules: it is read by a
test that runs without vLLM or httpx.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.peer.differences.differences_base import (
    Difference,
    closed_where_cut,
    complete_call,
    content_field,
    field_of,
    generated,
    json_object,
)
from tests.peer.differences.differences_m3 import M3_SERVER, m3_enabled, m3_unthink

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


MARKUP_IN_CONTENT_SERVERS = (*LEGACY_FAMILY_SERVERS, M3_SERVER)


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
    if case.stream or case.server not in ENGINE_FAMILY_SERVERS or not content_field(diff):
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
    if case.stream or case.server not in ENGINE_FAMILY_SERVERS or not content_field(diff):
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
    if not case.stream or case.server not in ENGINE_FAMILY_SERVERS or not content_field(diff):
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
    if re.fullmatch(r"tool_calls(\.\d+|\[\d+\])\.arguments", field_of(diff)) is None:
        return False
    v, o = diff.vllm, diff.ours
    if not json_object(o):
        return False
    ours = json.loads(o)
    if not ours:
        return False
    last_key = list(ours)[-1]
    last = ours[last_key]
    # Our last value is what the model wrote, no piece of a closing tag.
    if isinstance(last, str) and re.search(r"<(/[A-Za-z_]*)?$", last):
        return False
    if json_object(v):  # whole: vLLM dropped the open parameter
        return json.loads(v) == {k: x for k, x in ours.items() if k != last_key}
    return isinstance(v, str) and o.startswith(v) and v != o


def _tool_text_late(case: Any, diff: Any) -> bool:
    """Text between two calls that arrive in one chunk (GLM): vLLM's stream sends it after
    the next call's header, with that call's arguments; we send it before the call, in the
    order the model wrote it."""
    if not case.stream or case.server not in ENGINE_FAMILY_SERVERS or field_of(diff) != "order":
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
    field, v, o = field_of(diff), diff.vllm, diff.ours
    if field == "order":
        return v == _shift_tools(o, 1) and v != o
    m = re.fullmatch(r"tool_calls\.(\d+)", field)
    if m is None:
        return False
    return (v == "<absent>" and complete_call(o)) or (
        o == "<absent>" and int(m.group(1)) > 0 and complete_call(v)
    )


def _append_think_tools(case: Any, diff: Any) -> bool:
    """`minimax_m2_append_think` with tools in the request: vLLM's content loses the
    model's `</think>` (its stream always, its whole response when a call was made); we
    keep the output verbatim, so the trace goes back into the conversation as written."""
    return (
        case.server == APPEND_SERVER
        and bool(case.request.get("tools"))
        and content_field(diff)
        and isinstance(diff.ours, str)
        and END_THINK in diff.ours
        and diff.vllm == diff.ours.replace(END_THINK, "", 1)
    )


def _append_think_stream_no_end(case: Any, diff: Any) -> bool:
    """`minimax_m2_append_think`, a tool block with no `</think>` before it, streamed:
    vLLM's stream never parses tool calls (it waits for the reasoning to end), so the
    block goes out as content and no call is made; its whole response makes the call, and
    so do we, both ways."""
    g = generated(case, diff)
    if not (case.stream and case.server == APPEND_SERVER and g is not None):
        return False
    if MINIMAX_END_THINK_ID in g.token_ids:
        return False
    field, v, o = field_of(diff), diff.vllm, diff.ours
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
        re.fullmatch(r"tool_calls\.\d+", field) is not None and v == "<absent>" and complete_call(o)
    )


def _tool_markup_in_content(case: Any, diff: Any) -> bool:
    """tool_choice "none" or no tools, with hermes, MiniMax's append-think or MiniMax M3:
    vLLM returns the tool-call markup as content; ours is the same text without the markup
    (M3 streamed without thinking enabled: and without the think markup vLLM's stream
    passes as content too, `m3-stream-think-as-content`)."""
    req = case.request
    if case.server not in MARKUP_IN_CONTENT_SERVERS or not content_field(diff):
        return False
    if req.get("tools") and req.get("tool_choice") != "none":
        return False
    views = [diff.vllm]
    if case.server == M3_SERVER and case.stream and not m3_enabled(case):
        views.append(m3_unthink(diff.vllm))
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
        and content_field(diff)
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
        and content_field(diff)
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
        and content_field(diff)
        and isinstance(diff.ours, str)
        and END_THINK in diff.ours
        and diff.ours.replace(END_THINK, "") == diff.vllm
    )


def _hermes_cut_call(case: Any, diff: Any) -> bool:
    """hermes, a call cut short (length): vLLM's whole response returns the raw text,
    markup included, as content and no call; its stream sends the call with the arguments
    as far as they were written (open JSON); we send the call both ways, its arguments
    closed."""
    g = generated(case, diff)
    if case.server != "qwen-hermes" or g is None or g.finish_reason != "length":
        return False
    field, v, o = field_of(diff), diff.vllm, diff.ours
    if case.stream:
        return bool(re.fullmatch(r"tool_calls\.\d+\.arguments", field)) and closed_where_cut(v, o)
    if field == "content":
        return isinstance(v, str) and "<tool_call>" in v and (o is None or v.startswith(o))
    if field == "tool_calls":
        return v == [] and isinstance(o, list) and len(o) > 0
    return False


FAMILIES: list[Difference] = [
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
]
