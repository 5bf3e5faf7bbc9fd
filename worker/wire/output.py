"""An output record as a consumer of the output topic sees it, and the rule that drops repeats.

Every output carries `derender-request-id`, `derender-seq` (the input record's seq) and
`derender-part` (0, 1, … per input record): that triple is an output's identity, and a
redelivery repeats an output with its identity and its bytes (docs/integrate/contract.md,
"Identity and dedupe"). A request ends with its `[DONE]` output (kind `done`), or, answered
whole, with its one `response` output.

`Seen` holds what a reader needs to drop repeats, in constant memory per request: the
worker writes a request's outputs in (seq, part) order to one partition, so a repeat is
always at or below the highest (seq, part) delivered. The one output that can arrive out
of that order is an `error` taking the place of an output the broker refused (or of a
record whose seq could not be read, seq -1): their places are remembered apart.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from worker.constants import CHUNK, DONE_KIND, ERROR, H_KIND, H_PART, H_REQUEST_ID, H_SEQ, RESPONSE

# The kinds that end a request: nothing of it follows but repeats.
ENDS = frozenset((DONE_KIND, RESPONSE))
KINDS = frozenset((CHUNK, RESPONSE, ERROR, DONE_KIND))

# Requests remembered for dedupe: those in flight, and finished ones long enough for a
# redelivery of their last batch to be recognised.
DEFAULT_REMEMBER = 100_000


@dataclass(frozen=True, slots=True)
class Output:
    """One output record: the SSE `data:` payload the worker wrote for a request."""

    request_id: str
    seq: int  # the input record's seq (-1: an error for a record whose seq was unreadable)
    part: int  # 0, 1, … among that input record's outputs
    kind: str  # "chunk" | "response" | "error" | "done"
    value: bytes  # the payload: JSON, or b"[DONE]"
    # Every header, in order: the three above and the kind, then the input's trace
    # context (traceparent, tracestate, baggage) and any passed-through headers.
    headers: dict[str, str] = field(default_factory=dict, hash=False)
    partition: int = -1
    offset: int = -1

    @property
    def done(self) -> bool:
        """The `[DONE]` that closes a stream."""
        return self.kind == DONE_KIND

    @property
    def end(self) -> bool:
        """The request's last output: its `[DONE]`, or a whole (non-streaming) response."""
        return self.kind in ENDS

    def json(self) -> Any:
        """The payload parsed (`None` for `[DONE]`)."""
        return None if self.kind == DONE_KIND else json.loads(self.value)

    def sse(self) -> bytes:
        """The payload as one server-sent event, as a gateway writes it to its client."""
        return b"data: " + self.value + b"\n\n"


def from_record(
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...],
    partition: int = -1,
    offset: int = -1,
) -> Output | None:
    """An Output from a Kafka record's parts; None for a record that is no output (its
    identity headers missing or unreadable)."""
    h = {k: v.decode("utf-8", "replace") for k, v in headers}
    try:
        seq, part = int(h[H_SEQ]), int(h[H_PART])
    except (KeyError, ValueError):
        return None
    rid = h.get(H_REQUEST_ID) or (key or b"").decode("utf-8", "replace")
    kind = h.get(H_KIND, CHUNK)
    return Output(rid, seq, part, kind, value or b"", h, partition, offset)


class _Request:
    __slots__ = ("errors", "last")

    def __init__(self) -> None:
        self.last: tuple[int, int] | None = None  # the highest (seq, part) delivered
        self.errors: set[tuple[int, int]] | None = None  # where its errors were


class Seen:
    """Which outputs were delivered, per request; `first(output)` says whether one is new.

    Holds at most `remember` requests (a few hundred bytes each), the least recently
    active forgotten first; `forget` drops one at once. A request forgotten while a
    repeat of its outputs is still to come would see that repeat again.
    """

    def __init__(self, remember: int = DEFAULT_REMEMBER) -> None:
        if remember < 1:
            raise ValueError(f"remember must be at least 1, not {remember}")
        self.remember = remember
        self._requests: OrderedDict[str, _Request] = OrderedDict()

    def __len__(self) -> int:
        return len(self._requests)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._requests

    def first(self, out: Output) -> bool:
        r = self._requests.get(out.request_id)
        if r is None:
            r = self._requests[out.request_id] = _Request()
            if len(self._requests) > self.remember:
                self._requests.popitem(last=False)
        else:
            self._requests.move_to_end(out.request_id)
        place = (out.seq, out.part)
        if r.last is None or place > r.last:
            r.last = place
        elif out.kind != ERROR or (r.errors is not None and place in r.errors):
            return False
        if out.kind == ERROR:
            if r.errors is None:
                r.errors = set()
            r.errors.add(place)
        return True

    def forget(self, request_id: str) -> None:
        self._requests.pop(request_id, None)
