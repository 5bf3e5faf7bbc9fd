"""What a format reads (`Part`) and the words every format shares: the open item kinds
and deterministic ids. A leaf of `worker.core.apis`: the formats import it, never the
package itself (no import circle)."""

from __future__ import annotations

import hashlib

import msgspec

from worker.wire.outbound import ToolCallDelta

# FormatState.kind: which item (Responses) or content block (Messages) is open.
NONE = 0
REASONING = 1
TEXT = 2
CALL = 3


class Part(msgspec.Struct, gc=False):
    """What the chat path produced for choice 0 on one record (or a whole output).

    In the order a format emits it: reasoning, then content, then the tool calls (a
    record whose output changes kind in another order, text after a call, comes as
    several parts in the model's order: `apis.parts_of`). A call
    starts with a `ToolCallDelta` that has its `id` and `function.name` (its `arguments`
    may begin in the same delta); later deltas of the same `index` carry only argument
    fragments. Parallel calls follow one another: a call's fragments all come before the
    next call's start."""

    reasoning: str = ""
    content: str = ""
    calls: list[ToolCallDelta] = []
    finish_reason: str | None = None
    stop_reason: int | str | None = None


def item_id(prefix: str, request_id: str, index: int) -> str:
    """`<prefix>_` + 24 hex digits of a digest of (request id, index): the same on any
    worker and in replay."""
    digest = hashlib.blake2b(f"{index}:{request_id}".encode(), digest_size=12).hexdigest()
    return f"{prefix}_{digest}"
