"""The production state store: one Redis hash per request, compare-and-set by a Lua script.

Layout (docs/integrate/contract.md, "State"): key `derender:{<request_id>}` (the braces are
a Redis Cluster hash tag), a HASH with fields `seq`, `epoch` and `state` (the msgpack blob),
TTL refreshed on every write; `tables` (the request's tables, core/tables.py: written once
by the save that opens the request, read only by a load that asks for them); under
exactly-once also `upto`, `pseq` and `pstate` (see CAS_SCRIPT). Per batch there is exactly
one round trip to load and one to save (in a cluster, one per master touched, all masters at
once).

Three modes:
- `standalone` (default): the whole batch is ONE command each way — a load script that
  reads every key, and a save script that applies every compare-and-set. Building and
  parsing commands is most of the client's cost in Python, so one command instead of one
  per request is what makes Redis cheap here.
- `cluster`: a real Redis Cluster client (adapters/redis_cluster.py). A script may only
  touch keys of one hash slot, so the save groups the batch's keys by slot — one
  CAS_SCRIPT call per slot (with a hash tag per request, mostly one key each) — and the
  load is one HMGET per key; the calls are grouped by the master serving their slot: one
  pipeline per master, all masters at once. Round trips per batch = masters touched.
  MOVED, ASK, TRYAGAIN and NOSCRIPT are followed inside the call; connection errors and
  CLUSTERDOWN are raised like any other.
- `proxy`: a pipeline of single-key commands (HMGET; the save script called with one
  key) over one connection, so no command spans hash slots — for Redis Cluster behind a
  cluster-aware proxy (what `cluster` was before it spoke the cluster protocol itself).
All three save with the same Lua, so they cannot disagree on what a write may do; the
HMGET loads are read as LOAD_SCRIPT reads (`triple`), and the contract suites run on all.

Fencing in a cluster: a partition's epoch key (`<prefix>epoch:<scope>`) and its requests'
keys live in different slots, often on different masters, and nothing here needs them
together: the epoch is claimed once (INCR on the epoch key's master), carried in every
write, and compared by CAS_SCRIPT against the epoch stored IN the request's own hash. So
each compare-and-set is atomic on one key of one slot, and a zombie holding an older epoch
is refused wherever the key lives (tests/adapters/state/test_redis_cluster.py shows it).

Replication: Redis replicates asynchronously, so a save a master acknowledged can die
with it before its replica has it; after the failover the request's next record finds an
older state (`sequence_gap`). `wait_replicas` N (standalone and cluster) ends each
master's save pipeline with `WAIT N <timeout>` — same round trip, the save returns once N
replicas have the writes — and raises NotReplicated (transient: the batch is retried, and
the same writes are accepted again) when fewer acknowledge in time.

Errors: a connection or timeout error is raised to the caller, which backs off and retries
the whole batch. redis-py's own retry loop is switched off (`_NO_RETRY`): it would re-send
a whole pipeline behind the caller's back. Re-sending is harmless anyway, because the script
accepts the exact same write again (same seq, epoch and blob) as already applied: a save whose
reply was lost is not mistaken for a refusal when the caller retries it. Redis refusing the
credentials, the ACL or TLS raises RedisRefused instead, a configuration error naming the fix
(redis_access.py); `start` sends every command once, so that shows before the first batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError

from worker.adapters.state.redis_access import (
    access,
    check_url,
    first_error,
    probe_commands,
    refusal,
    tls_verdict,
)
from worker.adapters.state.redis_cluster import (
    Call,
    ClusterClient,
    NotReplicated,
    count_trips,
    reset_trips,
    trips_here,
)
from worker.adapters.state.redis_layout import (
    CAS_SCRIPT,
    CAS_SHA,
    LOAD_SCRIPT,
    LOAD_SHA,
    SCRIPTS,
    fields,
    triple,
)
from worker.adapters.state.redis_packing import with_hiredis_packing
from worker.constants import DEFAULT_DONE_TTL_S, DEFAULT_TTL_S, KEY_PREFIX, epoch_key, state_key
from worker.ports import StateStore, StateWrite, Stored
from worker.urls import redact_url

# A Redis that does not answer within this long is treated as down (the caller retries
# with backoff). Far above a healthy round trip (< 1 ms on a LAN, a few ms cross-zone) and
# far below the TTLs, so a stalled server is noticed before any state could expire.
DEFAULT_SOCKET_TIMEOUT_S = 5.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
# With `wait_replicas`: how long a save waits for the replicas' acknowledgement.
DEFAULT_WAIT_TIMEOUT_S = 1.0

# Zero retries inside redis-py: the caller owns retry and backoff (see the module docstring).
_NO_RETRY = Retry(NoBackoff(), 0)

MODES = ("standalone", "cluster", "proxy")


def _check_replicated(acked: Any, wanted: int, wait_ms: int) -> None:
    _raise_if_error(acked)
    if int(acked) < wanted:
        raise NotReplicated(
            f"{acked} of {wanted} replicas acknowledged the writes within {wait_ms} ms"
        )


def _raise_if_error(reply: Any) -> None:
    if isinstance(reply, Exception):
        raise reply


# One write's ARGV for CAS_SCRIPT.
_CasArgs = tuple[str | int, int, int, bytes, int, str, bytes]


def _ttl_ms(ttl_s: float) -> int:
    ttl_ms = round(ttl_s * 1000)
    if ttl_ms <= 0:
        raise ValueError(f"a TTL must be positive, got {ttl_s} s")
    return ttl_ms


class RedisStore:
    """The StateStore on Redis (standalone, a Redis Cluster, or a cluster-aware proxy)."""

    def __init__(
        self,
        url: str,
        ttl_s: float = DEFAULT_TTL_S,
        done_ttl_s: float = DEFAULT_DONE_TTL_S,
        key_prefix: str = KEY_PREFIX,
        *,
        socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        mode: str = "standalone",
        wait_replicas: int = 0,
        wait_timeout_s: float = DEFAULT_WAIT_TIMEOUT_S,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"redis mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self._url_for_logs = redact_url(url)  # (a seed list is redacted item by item)
        check_url(url)
        # What refusals name (server, user, prefix): redis_access.refusal.
        self._access = access(url, key_prefix, mode, wait_replicas)
        self._ttl_ms = _ttl_ms(ttl_s)
        self._done_ttl_ms = _ttl_ms(done_ttl_s)
        self.key_prefix = key_prefix
        if wait_replicas < 0 or (wait_replicas and mode == "proxy"):
            raise ValueError(f"wait_replicas: 0 or more, and 0 behind a proxy; got {wait_replicas}")
        if wait_replicas and not 0 < wait_timeout_s < socket_timeout_s:
            raise ValueError("the replicas' wait must be positive and below the socket timeout")
        # Saves answer only once this many replicas of each master have them (WAIT).
        self.wait_replicas = wait_replicas
        self._wait_ms = max(1, round(wait_timeout_s * 1000))
        self._cluster: ClusterClient | None = None
        if mode == "cluster":
            self._cluster = ClusterClient(
                url,
                socket_timeout_s=socket_timeout_s,
                connect_timeout_s=connect_timeout_s,
                retry=_NO_RETRY,
                prepare=with_hiredis_packing,
            )
        else:
            self._client: Redis = Redis.from_url(
                url,
                retry=_NO_RETRY,
                socket_timeout=socket_timeout_s,
                socket_connect_timeout=connect_timeout_s,
            )
            with_hiredis_packing(self._client)
        # Network round trips sent (tests and benchmarks assert 1 per load and per save;
        # in a cluster, one per master touched).
        self._round_trips = 0
        # Until the scripts are known to be on the server, a round trip loads them first
        # (more commands, not more round trips).
        self._scripts_loaded = False

    def __repr__(self) -> str:
        return (
            f"RedisStore({self._url_for_logs!r}, key_prefix={self.key_prefix!r}, "
            f"mode={self.mode!r})"
        )

    @property
    def round_trips(self) -> int:
        if self._cluster is not None:
            return self._round_trips + self._cluster.round_trips
        return self._round_trips

    @round_trips.setter
    def round_trips(self, value: int) -> None:
        self._round_trips = value - (self._cluster.round_trips if self._cluster else 0)

    @property
    def last_round_trips(self) -> int:
        """Round trips of this task's last load, save or epoch claim: 1 on one Redis (2
        when the scripts had to be loaded again), one per master touched in a cluster.
        What the batch loop reports to `derender_redis_round_trips`."""
        return trips_here()

    def key(self, request_id: str) -> str:
        return state_key(self.key_prefix, request_id)

    def epoch_key(self, scope: str) -> str:
        return epoch_key(self.key_prefix, scope)

    @contextlib.contextmanager
    def _refusals(self) -> Iterator[None]:
        """Redis refusing the credentials, the ACL or TLS: RedisRefused (exit 2), saying
        what to fix (redis_access). Anything else as it is."""
        try:
            yield
        except (RedisError, OSError) as exc:
            refused = refusal(exc, self._access)
            if refused is None:
                raise
            raise refused from None

    async def load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None = None,
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        with self._refusals():
            return await self._load_many(request_ids, first_offsets, tables_for)

    async def _load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None,
        tables_for: AbstractSet[str],
    ) -> dict[str, Stored | None]:
        reset_trips()
        if not request_ids:
            return {}
        prefix = self.key_prefix
        keys = [f"{prefix}{{{rid}}}" for rid in request_ids]
        firsts = first_offsets or [-1] * len(keys)
        wanted = [rid in tables_for for rid in request_ids]
        if self._cluster is not None:
            triples = await self._cluster_load(keys, firsts, wanted)
        elif self.mode == "proxy":
            async with self._client.pipeline(transaction=False) as pipe:
                for key, f, w in zip(keys, firsts, wanted, strict=True):
                    pipe.hmget(key, fields(f >= 0, w))
                self.round_trips += 1
                count_trips()
                replies = await pipe.execute(raise_on_error=False)
            triples = [triple(*a) for a in zip(replies, firsts, wanted, strict=True)]
        else:
            args: list[str | bytes | int] = []
            for f, w in zip(firsts, wanted, strict=True):
                args += (f if f >= 0 else "", "1" if w else "")
            flat = await self._script(LOAD_SHA, keys, args)
            triples = list(zip(flat[0::3], flat[1::3], flat[2::3], strict=True))
        out: dict[str, Stored | None] = {}
        for rid, (seq, blob, tables) in zip(request_ids, triples, strict=True):
            # A hash without `seq` is not one of ours: treated as no state (a write
            # expecting none is then refused, since the key exists).
            if seq is None:
                out[rid] = None
            else:
                out[rid] = Stored(int(seq), blob if blob is not None else b"", tables)
        return out

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        with self._refusals():
            return await self._save_many(writes)

    async def _save_many(self, writes: list[StateWrite]) -> list[str]:
        reset_trips()
        if not writes:
            return []
        prefix, ttl, done_ttl = self.key_prefix, self._ttl_ms, self._done_ttl_ms
        keys = [f"{prefix}{{{w.request_id}}}" for w in writes]
        # Integers go as they are: the packer writes them in decimal, as str() would.
        args_of = [
            (
                "" if w.expected_seq is None else w.expected_seq,
                w.seq,
                w.epoch,
                w.blob,
                done_ttl if w.done else ttl,
                f"{w.since} {w.first_offset} {w.last_offset}" if w.versioned else "",
                w.tables,
            )
            for w in writes
        ]
        if self._cluster is not None:
            flags = await self._cluster_cas(keys, args_of)
        elif self.mode == "proxy":
            flags = await self._per_key_cas(keys, args_of)
        else:
            flags = await self._script(CAS_SHA, keys, [a for args in args_of for a in args])
        return [w.request_id for w, ok in zip(writes, flags, strict=True) if not ok]

    async def _script(self, sha: str, keys: list[str], args: list[str | bytes | int]) -> list[Any]:
        """One EVALSHA in one round trip (the scripts ride along when the server may not
        have them: first use, or after a restart, failover or SCRIPT FLUSH)."""
        for attempt in (0, 1):
            load = not self._scripts_loaded or attempt == 1
            async with self._client.pipeline(transaction=False) as pipe:
                if load:
                    pipe.script_load(CAS_SCRIPT)
                    pipe.script_load(LOAD_SCRIPT)
                pipe.evalsha(sha, len(keys), *keys, *args)
                wait = sha == CAS_SHA and self.wait_replicas > 0
                if wait:
                    pipe.execute_command("WAIT", self.wait_replicas, self._wait_ms)
                self.round_trips += 1
                count_trips()
                replies = await pipe.execute(raise_on_error=False)
            acked = replies.pop() if wait else None
            for r in replies[:-1]:
                if isinstance(r, Exception):
                    raise r
            reply = replies[-1]
            if isinstance(reply, NoScriptError) and not load:
                self._scripts_loaded = False
                continue
            if isinstance(reply, Exception):
                raise reply
            self._scripts_loaded = True
            if wait:
                _check_replicated(acked, self.wait_replicas, self._wait_ms)
            return list(reply)
        raise RuntimeError("Redis lost the scripts right after loading them")

    async def _per_key_cas(
        self,
        keys: list[str],
        args_of: list[_CasArgs],
    ) -> list[int]:
        flags: list[int] = [0] * len(keys)
        pending = list(range(len(keys)))
        load = not self._scripts_loaded
        while pending:
            async with self._client.pipeline(transaction=False) as pipe:
                if load:
                    pipe.script_load(CAS_SCRIPT)
                    pipe.script_load(LOAD_SCRIPT)
                for i in pending:
                    pipe.evalsha(CAS_SHA, 1, keys[i], *args_of[i])
                self.round_trips += 1
                count_trips()
                replies = await pipe.execute(raise_on_error=False)
            if load:
                for r in replies[:2]:
                    if isinstance(r, Exception):
                        raise r
                replies = replies[2:]
                self._scripts_loaded = True
            no_script: list[int] = []
            for i, reply in zip(pending, replies, strict=True):
                if isinstance(reply, NoScriptError):
                    no_script.append(i)
                elif isinstance(reply, Exception):
                    # The caller retries the whole batch; writes already applied here
                    # are accepted again as the same write (see CAS_SCRIPT).
                    raise reply
                else:
                    flags[i] = int(reply[0])
            if no_script and load:
                raise RuntimeError("Redis lost the CAS script right after loading it")
            pending, load = no_script, bool(no_script)
        return flags

    async def _cluster_load(
        self, keys: list[str], firsts: list[int], wanted: list[bool]
    ) -> list[tuple[Any, Any, Any]]:
        """One HMGET per key, pipelined per master (as the proxy mode's, read as
        LOAD_SCRIPT reads: `triple`). A script per slot would do the same reads at ten
        times Redis's cost per key, and a batch's keys are nearly all in slots of their
        own."""
        assert self._cluster is not None
        cluster = self._cluster
        calls = [Call(cluster.slot(key), [i]) for i, key in enumerate(keys)]
        triples: list[tuple[Any, Any, Any]] = [(None, None, None)] * len(keys)

        def build(parts: list[int]) -> tuple[Any, ...]:
            i = parts[0]
            return ("HMGET", keys[i], *fields(firsts[i] >= 0, wanted[i]))

        for call in await cluster.run(calls, build):
            i = call.parts[0]
            triples[i] = triple(call.reply, firsts[i], wanted[i])
        return triples

    def _by_slot(self, keys: list[str]) -> list[Call]:
        """One call per hash slot of `keys` (a script may only touch keys of one slot)."""
        assert self._cluster is not None
        slot = self._cluster.slot
        groups: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            groups.setdefault(slot(key), []).append(i)
        return [Call(s, parts) for s, parts in groups.items()]

    async def _cluster_cas(self, keys: list[str], args_of: list[_CasArgs]) -> list[int]:
        """CAS_SCRIPT once per hash slot, the slots' calls pipelined per master."""
        assert self._cluster is not None

        def build(parts: list[int]) -> list[Any]:
            cmd: list[Any] = ["EVALSHA", CAS_SHA, len(parts)]
            cmd.extend(keys[i] for i in parts)
            for i in parts:
                cmd.extend(args_of[i])
            return cmd

        flags = [0] * len(keys)
        calls = await self._cluster.run(
            self._by_slot(keys), build, SCRIPTS, self.wait_replicas, self._wait_ms
        )
        for call in calls:
            _raise_if_error(call.reply)
            for n, i in enumerate(call.parts):
                flags[i] = int(call.reply[n])
        return flags

    async def claim_epoch(self, scope: str) -> int:
        with self._refusals():
            return await self._claim_epoch(scope)

    async def _claim_epoch(self, scope: str) -> int:
        reset_trips()
        key = self.epoch_key(scope)
        if self._cluster is not None:
            slot = self._cluster.slot(key)
            calls = await self._cluster.run([Call(slot, [0])], lambda _: ("INCR", key))
            _raise_if_error(calls[0].reply)
            return int(calls[0].reply)
        self._round_trips += 1
        count_trips()
        # (INCR itself: redis-py's incr() sends INCRBY, another command for an ACL to allow.)
        return int(await self._client.execute_command("INCR", key))  # type: ignore[no-untyped-call]

    async def start(self) -> None:
        """Connect before the first batch, and send every command the store will send,
        once (redis_access.probe_commands): refused credentials, ACL or TLS raise
        RedisRefused (exit 2) now, not at the first record. In cluster mode the topology
        is read first, so that every node it names is a seed from the start. An
        unreachable Redis raises a connection error or a timeout (transient: retried)."""
        try:
            await self._probe()
        except (RedisError, OSError) as exc:
            cluster = self._cluster
            pool = (cluster.client(cluster.seeds[0]) if cluster else self._client).connection_pool
            verdict = await tls_verdict(exc, pool)
            refused = refusal(verdict, self._access) if verdict is not None else None
            if refused is None:
                raise
            raise refused from None

    async def _probe(self) -> None:
        commands = probe_commands(self.key_prefix, self.mode, self.wait_replicas)
        with self._refusals():
            if self._cluster is None:
                async with self._client.pipeline(transaction=False) as pipe:
                    for script in SCRIPTS:
                        pipe.script_load(script)
                    for command in commands:
                        pipe.execute_command(*command)
                    first_error(await pipe.execute(raise_on_error=False))
                self._scripts_loaded = True
                return
            await self._cluster.start()
            slot = self._cluster.slot(commands[0][3])  # (every key of the probe's: one slot)
            calls = [Call(slot, [i]) for i in range(len(commands))]
            done = await self._cluster.run(calls, lambda parts: commands[parts[0]], SCRIPTS)
            first_error([call.reply for call in done])

    async def close(self) -> None:
        if self._cluster is not None:
            await self._cluster.aclose()
        else:
            await self._client.aclose()


if TYPE_CHECKING:

    def _satisfies_the_protocol(store: RedisStore) -> StateStore:
        return store
