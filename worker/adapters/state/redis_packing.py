"""Redis commands packed by hiredis (C) rather than redis-py's asyncio packer (Python), for
the state store's standalone and proxy clients and each Redis Cluster node's pool."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import DataError

try:  # an optional speed-up: redis[hiredis] is a dependency, but the store works without it
    import hiredis
except ImportError:  # pragma: no cover
    hiredis = None  # type: ignore[assignment]


class HiredisPacking:
    """Builds commands with hiredis (C) instead of redis-py's asyncio packer (Python).

    A batch's save is one command of ~3,000 arguments; redis-py packs each one in Python
    (2.5 ms per 500 writes, a tenth of a whole batch at peak), hiredis in 0.4 ms. The
    bytes on the wire are the same RESP."""

    def pack_command(self, *args: Any) -> list[bytes]:
        # Like redis-py: a command name with spaces ("SCRIPT LOAD") is several arguments.
        head = args[0]
        if isinstance(head, str):
            head = head.encode()
        if b" " in head:
            args = (*head.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # (bytearray, memoryview, or a type neither packer takes)
            args = tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args)
            try:
                return [hiredis.pack_command(args)]
            except TypeError as exc:
                raise DataError(f"cannot send {exc}") from None

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        return [b"".join(self.pack_command(*cmd)[0] for cmd in commands)]


def with_hiredis_packing(client: Redis) -> None:
    pool = client.connection_pool
    base: type[AbstractConnection] = pool.connection_class
    if hiredis is None or issubclass(base, HiredisPacking):
        return
    pool.connection_class = type(f"Hiredis{base.__name__}", (HiredisPacking, base), {})
