"""Differences of any model: the request's options (`stop`, `echo`, usage, the bounds we
refuse) and the shape of a stream.

Imports nothing of the project but its other `differences_*` modules: it is read by a
test that runs without vLLM or httpx.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.peer.differences.differences_base import Difference


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
    the text equals the one-shot decode (docs/integrate/contract.md, "Guarantees")."""
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


REQUESTS: list[Difference] = [
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
]
