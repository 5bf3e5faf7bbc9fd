"""The states this process saved last, decoded: a batch that loads one back skips its decode.

A request's records are spread over many batches (an engine streams one token per record,
and many requests interleave), so nearly every batch loads the very blob the previous
batch saved for the request. Decoding it again rebuilds the object the previous batch
already held. `WarmStates` keeps that object beside its blob; `take` hands it back when
the store returns the same bytes, else decodes as before.

Correct by construction, whatever the store did meanwhile: a state is only reused for a
blob equal to the one it was encoded to (the core is deterministic: equal bytes decode to
an equal state), and `take` removes it, since the core changes the state it is given in
place. What the store holds and how it is written are unchanged.
"""

from __future__ import annotations

from collections import OrderedDict

from worker.core.state import CorruptState, RequestState, load_state


class WarmStates:
    """request id → (the blob saved, the state it encodes); at most `size` of them, the
    oldest let go first (a decoded state of a streamed chat request with parsers is about
    1.6 kB: 4096 of them hold ~7 MB)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._held: OrderedDict[str, tuple[bytes, RequestState]] = OrderedDict()
        self.hits = 0

    def __len__(self) -> int:
        return len(self._held)

    def take(self, request_id: str, blob: bytes) -> RequestState | CorruptState | None:
        """`load_state(blob)`, without decoding when this process saved that very blob."""
        entry = self._held.pop(request_id, None)
        if entry is not None and (entry[0] is blob or entry[0] == blob):
            self.hits += 1
            return entry[1]
        return load_state(blob)

    def keep(self, request_id: str, blob: bytes, state: RequestState) -> None:
        """`state` is encoded as `blob`, and nothing changes it any more (the batch is over)."""
        held = self._held
        held[request_id] = (blob, state)
        if len(held) > self.size:
            held.popitem(last=False)

    def drop(self, request_id: str) -> None:
        self._held.pop(request_id, None)
