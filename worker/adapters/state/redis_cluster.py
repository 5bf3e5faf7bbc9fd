"""A small Redis Cluster client for the state store: batched calls grouped by node.

Why not redis-py's `RedisCluster`: its pipeline builds, routes and parses every command in
Python, retries behind the caller's back, and cannot tell how many round trips a batch
took. The store needs one thing only — send many single-slot commands (a Lua call per hash
slot, since a script may only touch keys of one slot) in as few round trips as possible —
so this does just that, over redis-py's per-node asyncio connections (hiredis-packed, as
in standalone mode):

- Topology: `CLUSTER SLOTS` from any node that answers; slot → master. Reads and writes
  both go to masters. `start()` reads it at once (the worker calls it before anything
  else: an unreachable cluster is then a start-up outage, retried, and refused
  credentials stop the worker at once), else the first call reads it.
- Seeds: every node ever learnt (each reply's masters AND replicas) is a seed for later
  refreshes, as are the nodes given in the URL. A refresh asks the current masters
  first, then the other known nodes, then the URL's seeds, with the nodes whose last
  attempt failed put last. So the seed the worker started from may die, and the whole
  URL's list with it: any node of the cluster that is still up answers.
- A batch: its calls grouped by the master of their slot; one pipeline per master, all
  masters at once (`asyncio.gather`). Round trips per batch = masters touched.
- `MOVED` (a slot now served elsewhere): the slot is re-pointed at once and the whole map
  refreshed before the next round; `ASK` (a slot being migrated, the key already moved):
  that call is sent again to the importing node behind `ASKING`; `TRYAGAIN` (a call
  with several keys of a slot in mid-migration): the call is split into single-key calls,
  which never get it. Only the redirected calls go again, in the same `run`.
- `NOSCRIPT` (a node restarted, a replica promoted): the scripts are loaded on that node
  and its calls sent again, in the same pipeline as the load.
- A connection error, a timeout or `CLUSTERDOWN` is raised to the caller (which backs off
  and retries the batch), and the map is refreshed on the next call. Writes applied before
  the error are accepted again as the same write (see redis_layout.CAS_SCRIPT).
- A refresh that no node answers raises a credentials refusal if any node gave one
  (WRONGPASS, NOPERM: the store tells it as what to fix, redis_access), else the last
  error (a connection error or a timeout: transient).

Seeds: `redis://[user:password@]host1:port1,host2:port2[,…][?options]` (one scheme and one
credential for all nodes; a node may also be given as a full URL). `rediss://` and the query
options redis-py reads from a URL (`ssl_ca_certs`, `ssl_certfile`, …) apply to every node.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import ConnectionPool, Redis

try:  # optional, as in redis_store
    import hiredis
except ImportError:  # pragma: no cover
    hiredis = None  # type: ignore[assignment]
from redis.asyncio.connection import parse_url
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    ClusterDownError,
    ClusterError,
    ConnectionError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.failures import ConfigError

log = logging.getLogger("derender.worker")

Addr = tuple[str, int]

# Redirections followed within one `run` before giving up (a slot bouncing between nodes
# means the cluster is being reconfigured: the caller backs off and retries the batch).
MAX_ROUNDS = 16
# Keys whose slot is remembered (about 100 bytes each).
SLOT_CACHE_SIZE = 100_000
# A TRYAGAIN means a migration is moving a slot's keys right now: a short pause.
TRYAGAIN_PAUSE_S = 0.01
# Credentials or ACL refused: no other node will take them either (classified CONFIG).
REFUSED = (AuthenticationError, AuthorizationError, NoPermissionError)


# Round trips of the store call running in this task (a lane): the batch loop reads it
# right after its load or save. Per task, as lanes share one store and run at once.
_trips_here: ContextVar[int] = ContextVar("derender_redis_round_trips_here", default=0)


def reset_trips() -> None:
    _trips_here.set(0)


def count_trips(n: int = 1) -> None:
    _trips_here.set(_trips_here.get() + n)


def trips_here() -> int:
    return _trips_here.get()


class NotReplicated(RedisError):
    """Fewer replicas than `--redis-wait-replicas` acknowledged a save in time. The writes
    are applied on the master, so the caller's retry of the batch (same writes) is
    accepted as already applied, and waits for the replicas again."""


def _pack(conn: Any, commands: list[Sequence[Any]]) -> list[bytes]:
    """The commands as one buffer: hiredis packs each in C (the connection's packer,
    which handles every argument type, is the fallback)."""
    if hiredis is not None:
        try:
            return [b"".join([hiredis.pack_command(tuple(cmd)) for cmd in commands])]
        except TypeError:  # (an argument type hiredis does not take)
            pass
    packed: list[bytes] = conn.pack_commands(commands)
    return packed


def slot_of(key: str | bytes) -> int:
    return key_slot(key.encode() if isinstance(key, str) else key)


@dataclass(eq=False)
class Call:
    """One command for one slot, covering some of the caller's items (`parts`)."""

    slot: int
    parts: list[int]
    reply: Any = None
    ask: Addr | None = field(default=None, repr=False)


def _host(node: Sequence[Any]) -> str:
    return node[0].decode() if isinstance(node[0], bytes) else str(node[0])


def _node_addr(node: Sequence[Any], asked: Addr) -> Addr:
    """A node of a CLUSTER SLOTS entry ([host, port, id, …]) as an address. An empty or
    "?" host means "the address you reached me on"."""
    host = _host(node)
    return (host if host not in ("", "?") else asked[0], int(node[1]))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def parse_seeds(url: str) -> tuple[dict[str, Any], list[Addr]]:
    """The connection options every node gets (from the first URL) and the seed nodes."""
    items = [item.strip() for item in url.split(",") if item.strip()]
    if not items:
        raise ValueError("no Redis Cluster seed node given")
    if "?" in items[-1] and "?" not in items[0]:  # (the options after the list: all nodes')
        items[-1], _, query = items[-1].partition("?")
        items[0] += f"?{query}"
    first = items[0]
    if "://" not in first:
        first = f"redis://{first}"
    options: dict[str, Any] = dict(parse_url(first))
    if options.get("db", 0) not in (0, None):
        raise ValueError("a Redis Cluster has database 0 only: drop the /<db> from the URL")
    if "path" in options:
        raise ValueError("a Redis Cluster is reached over TCP, not a unix socket")
    seeds: list[Addr] = []
    for item in items:
        if "://" not in item:
            item = f"redis://{item}"
        parts = urlsplit(item)
        if not parts.hostname:
            raise ValueError(f"a Redis Cluster seed without a host: {item!r}")
        seeds.append((parts.hostname, parts.port or 6379))
    for name in ("host", "port", "db"):
        options.pop(name, None)
    return options, seeds


class ClusterClient:
    """Slot map, one connection pool per master, and `run`: batched calls by node."""

    def __init__(
        self,
        url: str,
        *,
        socket_timeout_s: float,
        connect_timeout_s: float,
        retry: Any,
        prepare: Callable[[Redis], None] = lambda client: None,
    ) -> None:
        self._options, self.seeds = parse_seeds(url)
        self._options.update(
            retry=retry,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=connect_timeout_s,
        )
        self._prepare = prepare
        self._timeout_s = socket_timeout_s
        self._slots: list[Addr | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        # Every node a CLUSTER SLOTS reply named, masters and replicas, in the order
        # learnt: all of them seeds for the next refreshes. Nodes are never forgotten (a
        # node gone for good costs one refused connection, tried last).
        self._known: dict[Addr, None] = {}
        # Nodes whose last attempt failed (a refresh, or a batch's pipeline): asked last.
        self._failing: set[Addr] = set()
        self._clients: dict[Addr, Redis] = {}
        self._stale = True
        self._slot_cache: dict[str, int] = {}
        # Masters known to hold the scripts (reset on NOSCRIPT, e.g. after a failover).
        self._scripted: set[Addr] = set()
        # Network round trips: one per node pipeline sent, and one per CLUSTER SLOTS.
        self.round_trips = 0
        # Times the slot map was (re)read, and redirections followed (for tests and logs).
        self.refreshes = 0
        self.redirects = 0

    def slot(self, key: str) -> int:
        """The hash slot of a key (cached: a batch's keys are loaded, then saved)."""
        slot = self._slot_cache.get(key)
        if slot is None:
            if len(self._slot_cache) >= SLOT_CACHE_SIZE:
                self._slot_cache.clear()
            slot = self._slot_cache[key] = slot_of(key)
        return slot

    @property
    def masters(self) -> list[Addr]:
        return sorted({a for a in self._slots if a is not None})

    @property
    def nodes(self) -> list[Addr]:
        """Every node a refresh may ask, in the order it asks them."""
        order: dict[Addr, None] = dict.fromkeys([*self.masters, *self._known, *self.seeds])
        # (A stable sort: the failing ones last, each group in the order above.)
        return sorted(order, key=lambda addr: addr in self._failing)

    @property
    def started(self) -> bool:
        """The slot map has been read at least once."""
        return self.refreshes > 0

    async def start(self) -> None:
        """Read the topology now, rather than at the first call (see the module docstring).

        No node answers: the last error, a connection error or a timeout, which the
        worker retries as a start-up outage; a refusal of the credentials or the ACL if a
        node gave one (the store tells it as what to fix: redis_access). The URL names no
        Redis Cluster: ConfigError, whose message says what to fix."""
        try:
            await self.refresh()
        except ResponseError as e:
            if isinstance(e, REFUSED) or "cluster support disabled" not in str(e):
                raise
            seeds = ",".join(f"{host}:{port}" for host, port in self.seeds)
            raise ConfigError(
                f"{seeds} is not a Redis Cluster ({_first_line(e)}): use --redis-mode "
                "standalone, or list the cluster's nodes in --redis-url"
            ) from None
        log.info(
            "Redis Cluster: %d masters, %d nodes known (every one a seed from now on)",
            len(self.masters),
            len(self._known),
        )

    def client(self, addr: Addr) -> Redis:
        client = self._clients.get(addr)
        if client is None:
            host, port = addr
            pool = ConnectionPool(host=host, port=port, **self._options)
            client = Redis(connection_pool=pool)
            self._prepare(client)
            self._clients[addr] = client
        return client

    async def refresh(self) -> None:
        """Read the slot map from the first node that answers (in the order of `nodes`).
        None answers: a refusal of the credentials if some node gave one, else the last
        error."""
        last: BaseException | None = None
        refused: BaseException | None = None
        for addr in self.nodes:
            try:
                self.round_trips += 1
                count_trips()
                client = self.client(addr)
                reply = await client.execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]
                self._apply_slots(reply, addr)
            except (ConnectionError, RedisTimeoutError, OSError, ResponseError) as e:
                # (ResponseError: NOPERM, LOADING, a node not in cluster mode or serving
                # no slot: another node may answer.)
                self._failing.add(addr)
                last = e
                if isinstance(e, REFUSED) and refused is None:
                    refused = e
                continue
            self._failing.discard(addr)
            self.refreshes += 1
            self._stale = False
            return
        error = refused or last
        assert error is not None
        raise error

    def _apply_slots(self, reply: Iterable[Any], asked: Addr) -> None:
        slots: list[Addr | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        learnt: list[Addr] = []
        for entry in reply:
            start, end = int(entry[0]), int(entry[1])
            if len(entry) < 3:
                continue
            # The master, then its replicas (a replica whose endpoint is unknown, "?",
            # is not learnt: "?" means the asked node's address only for the master).
            nodes = [_node_addr(entry[2], asked)]
            nodes += [_node_addr(n, asked) for n in entry[3:] if _host(n) not in ("", "?")]
            slots[start : end + 1] = [nodes[0]] * (end - start + 1)
            learnt.extend(nodes)
        if not any(slots):
            raise ClusterDownError("CLUSTERDOWN no node serves any slot (is cluster mode on?)")
        self._slots = slots
        self._known.update(dict.fromkeys(learnt))

    async def run(
        self,
        calls: list[Call],
        build: Callable[[list[int]], Sequence[Any]],
        scripts: Sequence[str] = (),
        wait_replicas: int = 0,
        wait_timeout_ms: int = 0,
    ) -> list[Call]:
        """Send every call (its command is `build(call.parts)`) to the master of its slot;
        returns the calls answered, each with its reply (a call split after TRYAGAIN comes
        back as several). `scripts` are loaded first on masters not known to hold them.

        `wait_replicas` N > 0: each master's pipeline ends with `WAIT N timeout`, so it
        answers once N of its replicas have the writes; fewer raises NotReplicated."""
        pending = calls
        done: list[Call] = []
        for _ in range(MAX_ROUNDS):
            if self._stale:
                await self.refresh()
            by_node: dict[Addr, list[Call]] = {}
            for call in pending:
                addr = call.ask or self._slots[call.slot]
                if addr is None:
                    self._stale = True
                    raise ClusterDownError(f"CLUSTERDOWN hash slot {call.slot} is not served")
                by_node.setdefault(addr, []).append(call)
            wait = ("WAIT", wait_replicas, wait_timeout_ms) if wait_replicas > 0 else None
            count_trips(len(by_node))  # (here: the gather's tasks have contexts of their own)
            results = await asyncio.gather(
                *(self._send(addr, group, build, scripts, wait) for addr, group in by_node.items()),
                return_exceptions=True,
            )
            retry: list[Call] = []
            error: BaseException | None = None
            pause = False
            for (addr, group), result in zip(by_node.items(), results, strict=True):
                if isinstance(result, BaseException):
                    if not isinstance(result, Exception):
                        raise result  # cancelled: as it is
                    self._stale = True
                    if isinstance(result, (ConnectionError, RedisTimeoutError, OSError)):
                        self._failing.add(addr)  # the next refresh asks it last
                    error = error or result
                    continue
                for call, reply in zip(group, result, strict=True):
                    call.ask = None
                    if isinstance(reply, MovedError):
                        self.redirects += 1
                        self._slots[reply.slot_id] = (reply.host, reply.port)
                        self._stale = True
                        retry.append(call)
                    elif isinstance(reply, AskError):
                        self.redirects += 1
                        call.ask = (reply.host, reply.port)
                        retry.append(call)
                    elif isinstance(reply, NoScriptError):
                        self._scripted.discard(addr)
                        retry.append(call)
                    elif isinstance(reply, TryAgainError):
                        pause = True
                        retry.extend(Call(call.slot, [i]) for i in call.parts)
                    elif isinstance(reply, ClusterDownError):
                        self._stale = True
                        error = error or reply
                    else:
                        call.reply = reply
                        done.append(call)
            if error is not None:
                raise error
            if not retry:
                return done
            if pause:
                await asyncio.sleep(TRYAGAIN_PAUSE_S)
            pending = retry
        raise ClusterError(f"calls still redirected after {MAX_ROUNDS} rounds")

    async def _send(
        self,
        addr: Addr,
        calls: list[Call],
        build: Callable[[list[int]], Sequence[Any]],
        scripts: Sequence[str],
        wait: tuple[str, int, int] | None = None,
    ) -> list[Any]:
        """One round trip to one master: every call's command (behind ASKING where
        redirected, behind the scripts where they may be missing) in one write, then every
        reply, under one timeout for the whole exchange. (redis-py's pipeline arms a
        timer per reply: half the client's time for a batch of 500 single-key calls.)"""
        load = bool(scripts) and addr not in self._scripted
        commands: list[Sequence[Any]] = []
        if load:
            commands.extend(("SCRIPT", "LOAD", script) for script in scripts)
        for call in calls:
            if call.ask is not None:
                commands.append(("ASKING",))
            commands.append(build(call.parts))
        if wait is not None:
            commands.append(wait)
        pool = self.client(addr).connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        self.round_trips += 1
        try:
            async with asyncio.timeout(self._timeout_s):
                await conn.send_packed_command(_pack(conn, commands))
                replies: list[Any] = []
                for _ in commands:
                    try:
                        # (No timer per reply: the one above covers them all.)
                        replies.append(await conn.read_response(timeout=math.inf))
                    except ResponseError as e:
                        replies.append(e)
        except TimeoutError as e:
            await conn.disconnect(nowait=True)
            raise RedisTimeoutError(f"Timeout reading from {addr[0]}:{addr[1]}") from e
        except BaseException:
            # Replies left unread would answer the next commands on this connection.
            await conn.disconnect(nowait=True)
            raise
        finally:
            await pool.release(conn)
        if load:
            for r in replies[: len(scripts)]:
                if isinstance(r, Exception):
                    raise r
            replies = replies[len(scripts) :]
            self._scripted.add(addr)
        if wait is not None:
            acked = replies.pop()
            if isinstance(acked, Exception):
                raise acked
            if int(acked) < wait[1]:
                raise NotReplicated(
                    f"{addr[0]}:{addr[1]}: {acked} of {wait[1]} replicas acknowledged the "
                    f"writes within {wait[2]} ms"
                )
        if any(call.ask is not None for call in calls):
            out, at = [], 0
            for call in calls:
                if call.ask is not None:
                    at += 1  # the ASKING's OK
                out.append(replies[at])
                at += 1
            return out
        return replies

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                await client.aclose()
            finally:
                # A client given its pool does not close it: its connections would leak.
                await client.connection_pool.disconnect()
