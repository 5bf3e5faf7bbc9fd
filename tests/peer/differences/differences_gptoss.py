"""gpt-oss (Harmony; cases_gptoss.py): vLLM's Harmony path joins, re-serializes and names
tokens its own way, and never cuts at a stop.

Imports nothing of the project but its other `differences_*` modules: it is read by a
test that runs without vLLM or httpx.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.peer.differences.differences_base import Difference, any_field, field_of, generated

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
    if field_of(diff) not in ("content", "reasoning"):
        return False
    v, o, g = diff.vllm, diff.ours, generated(case, diff)
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
    if re.fullmatch(r"tool_calls\[\d+\]\.arguments", field_of(diff)) is None:
        return False
    v, o = diff.vllm, diff.ours
    if not (isinstance(v, str) and isinstance(o, str)) or v == o:
        return False
    try:
        return json.dumps(json.loads(o)) == v
    except ValueError:
        return False


# gpt-oss: the text of the EOS ids, as vLLM's Harmony path decodes them.
HARMONY_EOS_TEXT = {200002: "<|return|>", 199999: "<|endoftext|>", 200012: "<|call|>"}


def _harmony_eos_text(case: Any, diff: Any) -> bool:
    """gpt-oss, the output's last id an EOS that the Harmony parser reads as text (an
    `<|endoftext|>` ending an answer's body, or any EOS after an unfinished header, which
    vLLM's recovery decodes with special tokens kept): vLLM's content ends with the EOS's
    text (`Hi<|endoftext|>`, `Hello, no header.<|return|>`, `<|return|>` alone); ours is
    the same text without it (null when nothing is left)."""
    g = generated(case, diff)
    if case.server not in GPTOSS_SERVERS or g is None or not g.token_ids:
        return False
    if field_of(diff) not in ("content", "reasoning") or not isinstance(diff.vllm, str):
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
    field, v, o = any_field(diff), diff.vllm, diff.ours
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
    if case.server not in GPTOSS_SERVERS or field_of(diff) not in ("content", "reasoning"):
        return False
    v, o = diff.vllm, diff.ours
    return (
        isinstance(v, str)
        and isinstance(o, str)
        and "<|reserved_200018|>" in v
        and v.replace("<|reserved_200018|>", "<|endofprompt|>") == o
    )


GPTOSS: list[Difference] = [
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
