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


def _special_skip_set(case: Any, diff: Any) -> bool:
    """`skip_special_tokens` (and the parser path, which always drops specials):
    vLLM's derender decodes with its slow incremental path, which skips only the
    tokenizer's named specials (BOS, EOS), so other special added tokens
    (`<｜▁pad▁｜>`, placeholders) stay in the text; vLLM's own engine (tokenizers'
    DecodeStream) and we skip every token tokenizer.json marks special."""
    req = case.request
    # With a parser vLLM decodes with specials kept and its parser drops BOS and EOS
    # only; ours drops every special token that is not a marker.
    skipping = case.server != "off" or req.get("skip_special_tokens", True) is not False
    return (
        skipping
        and diff.path.rsplit(".", 1)[-1] in ("text", "content")
        and isinstance(diff.vllm, str)
        and isinstance(diff.ours, str)
        and len(diff.ours) < len(diff.vllm)
        and "<｜" in diff.vllm
    )


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
        case.server == "lax"
        and (choice == "required" or isinstance(choice, dict))
        and case.extra.get("shape") not in (None, forced)
    ):
        return False
    field = re.sub(r"^\.choices\.\d+\.(message\.)?", "", diff.path)
    if field in ("content", "finish_reason"):
        # Ours keeps the text, never the markup.
        return "｜DSML｜" not in json.dumps(diff.ours, ensure_ascii=False)
    return field.startswith("tool_calls") or field == "order"


DIFFERENCES: list[Difference] = [
    Difference(
        "stream-stop",
        "Streaming with `stop`: vLLM answers 400; we hold back and cut at the stop string",
        _stream_stop,
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
        "special-skip-set",
        "skip_special_tokens: vLLM's derender keeps special added tokens other than BOS/EOS",
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
]

# Observed, and possibly deliberate on our side, but not (yet) accepted: they still fail
# a case. A failing case's report names the proposal that would explain it; moving an
# entry into DIFFERENCES (and a row into README.md's table) accepts it.
PROPOSED: list[Difference] = []

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
