"""MiniMax M3 (cases_minimax_m3.py): its think blocks, which vLLM reads only once and
streams as content without thinking enabled, and its calls.

Imports nothing of the project but its other `differences_*` modules: it is read by a
test that runs without vLLM or httpx.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.peer.differences.differences_base import (
    CHOICE,
    Difference,
    content_field,
    field_of,
    generated,
    json_object,
)

# MiniMax M3 (cases_minimax_m3.py): its server, its think markers, the EOS text that ends
# a `stop` case's decoded output.
M3_SERVER = "minimax_m3-on"
M3_THINK, M3_END_THINK = "<mm:think>", "</mm:think>"
M3_TOOL_START = "]<]minimax[>[<tool_call>"
M3_EOS_TEXT = "[e~["
_M3_BLOCK = re.compile(re.escape(M3_THINK) + r".*?(?:" + re.escape(M3_END_THINK) + r"|$)", re.S)


def _m3_chat(case: Any) -> bool:
    return case.server == M3_SERVER and case.api == "chat"


def m3_enabled(case: Any) -> bool:
    kwargs = case.request.get("chat_template_kwargs") or {}
    return kwargs.get("thinking_mode") == "enabled"


def _m3_text(case: Any, diff: Any) -> str | None:
    """The output text of the choice a diff is about (`cases_minimax_m3.mark_texts`), less
    the EOS text."""
    m = CHOICE.match(diff.path)
    text = (case.extra.get("texts") or {}).get(m.group(1) if m else "0")
    return text.removesuffix(M3_EOS_TEXT) if isinstance(text, str) else None


def m3_unthink(text: str) -> str:
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
    if not (case.stream and _m3_chat(case)) or m3_enabled(case):
        return False
    text = _m3_text(case, diff)
    if text is None or (M3_THINK not in text and M3_END_THINK not in text):
        return False
    field, v, o = field_of(diff), diff.vllm, diff.ours
    if field == "content":
        return isinstance(v, str) and isinstance(o, str) and v != o and m3_unthink(v) == o
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
    if not _m3_chat(case) or not content_field(diff) or not isinstance(diff.ours, str):
        return False
    v = diff.vllm
    return M3_END_THINK in v and M3_THINK not in v and v.replace(M3_END_THINK, "") == diff.ours


def _m3_second_think_block(case: Any, diff: Any) -> bool:
    """MiniMax M3, a second think block: vLLM reads only the first as reasoning and keeps
    the later ones verbatim in the content; we read every block as reasoning (joined)."""
    if not _m3_chat(case) or (case.stream and not m3_enabled(case)):
        return False
    text = _m3_text(case, diff)
    if text is None:
        return False
    enabled = m3_enabled(case)
    if text.count(M3_THINK) < (1 if enabled else 2):
        return False
    field, v, o = field_of(diff), diff.vllm, diff.ours
    if field == "content":
        return isinstance(v, str) and M3_THINK in v and m3_unthink(v) == (o or "")
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
    if not (_m3_chat(case) and m3_enabled(case)):
        return False
    text = _m3_text(case, diff)
    if text is None or M3_THINK not in text:
        return False
    pre = text[: text.index(M3_THINK)]
    if not pre or M3_END_THINK in pre:
        return False
    field, v, o = field_of(diff), diff.vllm or "", diff.ours or ""
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
    if re.fullmatch(r"tool_calls(\.\d+|\[\d+\])\.arguments", field_of(diff)) is None:
        return None
    if not (json_object(diff.vllm) and json_object(diff.ours)):
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
    g = generated(case, diff)
    if not _m3_chat(case) or g is None or g.finish_reason != "length":
        return False
    text = _m3_text(case, diff)
    m = _M3_CUT_NAME.search(text or "")
    if m is None:
        return False
    name = m.group(1)

    def cut_call(call: Any) -> bool:
        return isinstance(call, dict) and call.get("name") == name and call.get("arguments") == "{}"

    field, v, o = field_of(diff), diff.vllm, diff.ours
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
    g = generated(case, diff)
    if not (case.stream and _m3_chat(case) and m3_enabled(case)) or g is None:
        return False
    if g.finish_reason != "length" or field_of(diff) != "reasoning":
        return False
    v, o = diff.vllm, diff.ours
    if not (isinstance(v, str) and isinstance(o, str) and o.startswith(v) and o != v):
        return False
    return M3_END_THINK.startswith(o[len(v) :])


M3: list[Difference] = [
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
