"""The one `chunk` of a streamed `serve` answer, when the core said nothing or several things.

vLLM answers every streamed call with exactly one chunk. The core gives a call's record
zero outputs (text held back) or several (a chat stream's opening before its first delta,
a completion's echo before its first tokens); these put them in vLLM's one-chunk shape,
and open each choice of a chat stream on its own first answer (`open_choice`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from worker.core import render
from worker.core.records.engine_metrics import full_metrics
from worker.core.state import RequestState, decode_state
from worker.serve import wire
from worker.serve.answers import UNREADABLE
from worker.serve.wire import given
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


class _Index(msgspec.Struct, gc=False):
    index: Any = None


_indexes_decoder = msgspec.json.Decoder(list[_Index])


def choice_index(head: wire.Head) -> int | None:
    """The index of the chunk's one choice (None: no choice, or one the core refuses)."""
    if not given(head.choices):
        return None
    try:
        choices = _indexes_decoder.decode(head.choices)
    except UNREADABLE:
        return None
    if not choices or not isinstance(choices[0].index, int) or isinstance(choices[0].index, bool):
        return None
    return choices[0].index


def open_choice(chunks: list[bytes], index: int, first: bool, rid: str, blob: bytes) -> list[bytes]:
    """A call's chunks opening its own choice, and no other. The core opens a chat stream
    once, every choice 0…n−1 at its first chunk with a choice (one stream of every
    choice: `run`, replay). A serve client may carry one stream_state per choice instead,
    each starting at null, and no call can tell which it does; so each choice opens on
    its own first answer (its role joined to its first delta, as vLLM's derender sends
    it), and a call answers the same whichever the client does. `first`: the core opened
    the stream in this call (its first n chunks are the openings, in order)."""
    state = decode_state(blob)
    n = state.opts.n
    if first:
        # (an index past the request's n: the core sends its role with its first text)
        return [chunks[index], *chunks[n:]] if index < n else chunks[n:]
    return [render.opening(state, rid, index).value, *chunks] if index < n else chunks
