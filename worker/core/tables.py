"""A request's tables: what it brings at seq 0 and never changes (stop strings, stop token
ids, its tools' names and parameter types), kept apart from the state.

The state is loaded, decoded, encoded and saved on every batch that touches a request; an
agent request's hundreds of tools or a request's thousands of stop strings would ride
along every time (docs/integrate/contract.md, "State"). So the state holds only the tables'
digest (16 bytes), and the tables themselves are
- stored once beside the state, in the same Redis hash (field `tables`, same slot, same
  TTL), written with the state that opens the request and read back only by a worker that
  does not hold them (after a rebalance or a restart: `TableCache.held`);
- compiled once per distinct content (`Tables`: the stop-string matcher, the stop-id set,
  the tool table by name) and kept in a bounded cache by digest, so requests of one agent
  with the same tools share one compiled copy.
Per-record cost and per-batch state bytes are then those of a plain request.

A state written before the tables existed carries its lists inline (`Options.stop`,
`Options.stop_token_ids`, `ParserState.tools`); `derender._tables` compiles them the same way.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import TYPE_CHECKING

import msgspec

from worker.core.errors import DerenderError
from worker.core.parsers.arguments.tools import NO_TOOLS, ToolTable
from worker.core.parsers.language.state import ToolSchema
from worker.core.text.stop import NO_STOPS, StopStrings

if TYPE_CHECKING:
    from worker.core.parsers import Parser
    from worker.core.parsers.language.state import ParserState
    from worker.wire.inbound import ChatRequest

DIGEST_BYTES = 16


class RequestTables(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """The stored form (msgpack). Field order is the layout: new fields at the end."""

    stop: list[str] = []
    stop_token_ids: list[int] = []
    tools: list[ToolSchema] = []

    def __bool__(self) -> bool:
        return bool(self.stop or self.stop_token_ids or self.tools)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(RequestTables)


class Tables:
    """A request's tables compiled for use; shared by every request with the same content."""

    __slots__ = ("blob", "digest", "stop_ids", "stopping", "stops", "tools")

    def __init__(self, raw: RequestTables, blob: bytes, digest: bytes) -> None:
        self.blob = blob  # the stored form; b"" for none
        self.digest = digest  # what the state holds; b"" for none
        self.stops: StopStrings = StopStrings(raw.stop) if raw.stop else NO_STOPS
        # `bool(stops)`, read once per record (StopStrings.__bool__ is a Python call).
        self.stopping = bool(self.stops)
        self.stop_ids: frozenset[int] = frozenset(raw.stop_token_ids)
        self.tools: ToolTable = ToolTable(raw.tools) if raw.tools else NO_TOOLS


EMPTY = Tables(RequestTables(), b"", b"")


def digest_of(blob: bytes) -> bytes:
    return hashlib.blake2b(blob, digest_size=DIGEST_BYTES).digest()


class TablesMissing(Exception):
    """The state names tables that are neither cached nor given (or do not match)."""


class TableCache:
    """Compiled tables by digest (least recently used out past `max_entries` or
    `max_bytes` of stored form), and the digest each recently seen request uses, so
    that a load asks the store for a request's tables only when this process does not
    hold them. Not state: losing it costs one read of the tables per request."""

    def __init__(
        self, max_entries: int = 1024, max_bytes: int = 64 << 20, max_requests: int = 1 << 17
    ) -> None:
        self.max_entries, self.max_bytes, self.max_requests = max_entries, max_bytes, max_requests
        self._tables: OrderedDict[bytes, Tables] = OrderedDict()
        self._bytes = 0
        # The digest each request uses (`note`). Read by `derender.step` before it calls
        # `note`: nearly every record's is already there, and the read costs less than a call.
        self.uses: OrderedDict[str, bytes] = OrderedDict()
        # The tool schemas of a tools JSON, as a parser reads them (`tool_schemas`), with
        # the JSON's size: bounded like the tables (count and bytes), as a hostile stream
        # of distinct tool sets must not grow it.
        self._schemas: OrderedDict[bytes, tuple[list[ToolSchema], int]] = OrderedDict()
        self._schema_bytes = 0
        self.compiled = 0  # compilations (a benchmark and the tests read it)

    def __len__(self) -> int:
        return len(self._tables)

    def held(self, request_id: str) -> Tables | None:
        """This request's compiled tables when this process holds them (EMPTY for a
        request known to have none), else None: a load must bring them. The caller keeps
        what this returns for the batch, so a later eviction cannot take it away mid-way."""
        digest = self.uses.get(request_id)
        if digest is None:
            return None
        return EMPTY if digest == b"" else self._get(digest)

    def note(self, request_id: str, digest: bytes) -> None:
        uses = self.uses
        if uses.get(request_id) != digest:
            uses[request_id] = digest
            if len(uses) > self.max_requests:
                uses.popitem(last=False)

    def of(self, raw: RequestTables) -> Tables:
        """The tables a request opens with (compiled, or the cached copy of the same)."""
        if not raw:
            return EMPTY
        try:
            blob = _encoder.encode(raw)
        except (OverflowError, msgspec.EncodeError) as exc:  # msgpack holds 64 bits
            raise DerenderError(
                f"a number is out of range: {exc}", param="stop_token_ids"
            ) from None
        digest = digest_of(blob)
        return self._get(digest) or self._put(Tables(raw, blob, digest))

    def tool_schemas(
        self, parser: Parser, template: ParserState, request: ChatRequest, tools_json: bytes
    ) -> list[ToolSchema]:
        """`parser.tool_schemas(template, request)`, remembered by the tools' JSON: the
        same tools in every request of an agent are read once, not once per request.
        (Shared lists: nothing changes a ToolSchema once built.)"""
        if not parser.reads_tools(template):
            return []
        key = digest_of(parser.tools_key + tools_json)
        found = self._schemas.get(key)
        if found is not None:
            self._schemas.move_to_end(key)
            return found[0]
        schemas = parser.tool_schemas(template, request)
        self._schemas[key] = (schemas, len(tools_json))
        self._schema_bytes += len(tools_json)
        while len(self._schemas) > 1 and (
            len(self._schemas) > self.max_entries or self._schema_bytes > self.max_bytes
        ):
            _, (_, size) = self._schemas.popitem(last=False)
            self._schema_bytes -= size
        return schemas

    def stored(self, digest: bytes, given: bytes | Tables | None) -> Tables:
        """The tables a state names: the ones given (held for the batch), cached, else
        compiled from the stored blob given. Raises TablesMissing when none holds them."""
        if not digest:
            return EMPTY
        if isinstance(given, Tables):
            if given.digest == digest:
                return given
            given = None
        blob = given
        found = self._get(digest)
        if found is not None:
            return found
        if blob is None or digest_of(blob) != digest:
            raise TablesMissing("the request's tables are missing from the store")
        try:
            raw = _decoder.decode(blob)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TablesMissing(f"the request's tables do not decode: {exc}") from None
        return self._put(Tables(raw, blob, digest))

    def _get(self, digest: bytes) -> Tables | None:
        found = self._tables.get(digest)
        if found is not None:
            self._tables.move_to_end(digest)
        return found

    def _put(self, tables: Tables) -> Tables:
        self.compiled += 1
        self._tables[tables.digest] = tables
        self._bytes += len(tables.blob)
        while len(self._tables) > 1 and (
            len(self._tables) > self.max_entries or self._bytes > self.max_bytes
        ):
            _, old = self._tables.popitem(last=False)
            self._bytes -= len(old.blob)
        return tables
