"""The one `chunk` of a streamed `serve` answer, when the core said nothing or several things.

vLLM answers every streamed call with exactly one chunk. The core gives a call's record
zero outputs (text held back) or several (a chat stream's opening before its first delta,
a completion's echo before its first tokens); these put them in vLLM's one-chunk shape.
"""

from __future__ import annotations

from typing import Any

import msgspec

from worker.core.records.engine_metrics import full_metrics
from worker.core.state import RequestState
from worker.wire import outbound as out
from worker.wire.inbound import GenerateStreamResponse


def empty_chunk(
    api: str, request_id: str, state: RequestState, gen: GenerateStreamResponse
) -> bytes:
    """The chunk of a call that says nothing yet (text held back: an incomplete character,
    a marker, a possible stop string): vLLM answers every call with one chunk, its one
    choice with an empty delta (no choice for a usage-only event)."""
    indexes = [c.index for c in gen.choices[:1]]
    body: out.ChatCompletionChunk | out.CompletionChunk
    if api == "chat":
        body = out.ChatCompletionChunk(
            request_id,
            "chat.completion.chunk",
            state.created,
            state.model,
            [out.ChatChunkChoice(index=i, delta=out.Delta()) for i in indexes],
        )
    else:
        body = out.CompletionChunk(
            request_id,
            "text_completion",
            state.created,
            state.model,
            [out.CompletionChunkChoice(index=i, text="") for i in indexes],
        )
    metrics = full_metrics(gen.metrics, "generate_chunk.metrics")  # checked by the core
    if metrics is not None:
        body.metrics = metrics
    return out.encode(body)


def merged(chunks: list[bytes]) -> bytes:
    """Several chunks of one call as one (a chat stream's opening and its first delta, a
    completion's echo and its first tokens): the choices in the order they first came
    (the opening's 0…n−1), those of one index joined, text after text, logprobs after
    logprobs."""
    first: dict[str, Any] = msgspec.json.decode(chunks[0])
    by_index: dict[int, dict[str, Any]] = {c["index"]: c for c in first["choices"]}
    for raw in chunks[1:]:
        later: dict[str, Any] = msgspec.json.decode(raw)
        for c in later["choices"]:
            have = by_index.get(c["index"])
            if have is None:
                by_index[c["index"]] = c
                first["choices"].append(c)
                continue
            if "delta" in c:  # chat: the opening's role and "" content, then the delta
                have["delta"] = _joined(have["delta"], c["delta"])
            else:
                have["text"] = have.get("text", "") + c.get("text", "")
            if c.get("logprobs") is not None:
                if have.get("logprobs") is None:
                    have["logprobs"] = c["logprobs"]
                else:
                    for k, v in c["logprobs"].items():
                        have["logprobs"][k] = have["logprobs"][k] + v
            for k in ("finish_reason", "stop_reason"):
                if c.get(k) is not None:
                    have[k] = c[k]
        for key in ("usage", "metrics"):
            if key in later:
                first[key] = later[key]
    return msgspec.json.encode(first)


def _joined(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Two deltas of one choice as one: texts and lists concatenated, the rest the later's."""
    joined = dict(before)
    for key, value in after.items():
        have = joined.get(key)
        joinable = isinstance(have, str) and isinstance(value, str) and key != "role"
        joinable = joinable or (isinstance(have, list) and isinstance(value, list))
        joined[key] = have + value if joinable else value
    return joined
