"""The production state store: one Redis hash per request, compare-and-set by a Lua script.

Layout (CONTRACT.md §6): key `derender:{<request_id>}` (the braces are a Redis Cluster hash
tag), a HASH with fields `seq`, `epoch` and `state` (the msgpack blob), TTL refreshed on
every write. Per batch there is exactly one round trip to load (a non-transactional
pipeline of HMGET) and one to save (a non-transactional pipeline of EVALSHA, one per
write). The script touches only its own key, so every command is single-slot and the
same code works against Redis Cluster nodes.

Errors: a connection or timeout error is raised to the caller, which backs off and retries
the whole batch. redis-py's own retry loop is switched off (`_NO_RETRY`): it would re-send
a whole pipeline behind the caller's back. Re-sending is harmless anyway, because the script
accepts the exact same write again (same seq, epoch and blob) as already applied: a save whose
reply was lost is not mistaken for a refusal when the caller retries it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError

from worker.adapters.store import DEFAULT_DONE_TTL_S, DEFAULT_TTL_S, StateStore
from worker.pipeline import StateWrite, Stored

DEFAULT_KEY_PREFIX = "derender:"
# A Redis that does not answer within this long is treated as down (the caller retries
# with backoff). Far above a healthy round trip (< 1 ms on a LAN, a few ms cross-zone) and
# far below the TTLs, so a stalled server is noticed before any state could expire.
DEFAULT_SOCKET_TIMEOUT_S = 5.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0

F_SEQ = "seq"
F_EPOCH = "epoch"
F_STATE = "state"

# Zero retries inside redis-py: the caller owns retry and backoff (see the module docstring).
_NO_RETRY = Retry(NoBackoff(), 0)

# KEYS[1]: the request's key.
# ARGV: expected seq ("" = the key must not exist), seq, epoch, state blob, TTL in ms.
# Returns 1 when applied (or when exactly this write is already stored), 0 when refused.
CAS_SCRIPT = """
local key = KEYS[1]
local expected = ARGV[1]
local seq = tonumber(ARGV[2])
local epoch = tonumber(ARGV[3])
if redis.call('EXISTS', key) == 1 then
  local cur = redis.call('HMGET', key, 'seq', 'epoch')
  local cur_seq = tonumber(cur[1])
  local cur_epoch = tonumber(cur[2]) or 0
  -- Fencing: a newer owner has written this request; an older one may not.
  if cur_epoch > epoch then
    return 0
  end
  -- The same write again (a retry after a lost reply): it is already applied.
  if cur_seq == seq and cur_epoch == epoch and redis.call('HGET', key, 'state') == ARGV[4] then
    redis.call('PEXPIRE', key, ARGV[5])
    return 1
  end
  if expected == '' or cur_seq == nil or tonumber(expected) ~= cur_seq then
    return 0
  end
elseif expected ~= '' then
  -- Expired or deleted since the batch loaded it.
  return 0
end
redis.call('HSET', key, 'seq', ARGV[2], 'epoch', ARGV[3], 'state', ARGV[4])
redis.call('PEXPIRE', key, ARGV[5])
return 1
"""
CAS_SHA = hashlib.sha1(CAS_SCRIPT.encode()).hexdigest()


def redact_url(url: str) -> str:
    """The URL with its password replaced by `***`, fit for logs and reprs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def _ttl_ms(ttl_s: float) -> int:
    ttl_ms = round(ttl_s * 1000)
    if ttl_ms <= 0:
        raise ValueError(f"a TTL must be positive, got {ttl_s} s")
    return ttl_ms


class RedisStore:
    """The StateStore on Redis (standalone, or one Cluster node per key slot)."""

    def __init__(
        self,
        url: str,
        ttl_s: float = DEFAULT_TTL_S,
        done_ttl_s: float = DEFAULT_DONE_TTL_S,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        *,
        socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> None:
        self._url_for_logs = redact_url(url)
        self._ttl_ms = _ttl_ms(ttl_s)
        self._done_ttl_ms = _ttl_ms(done_ttl_s)
        self.key_prefix = key_prefix
        self._client: Redis = Redis.from_url(
            url,
            retry=_NO_RETRY,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=connect_timeout_s,
        )
        # Network round trips sent (tests and benchmarks assert 1 per load and per save).
        self.round_trips = 0
        # Until the script is known to be on the server, the save pipeline loads it first
        # (one more command, not one more round trip).
        self._script_loaded = False

    def __repr__(self) -> str:
        return f"RedisStore({self._url_for_logs!r}, key_prefix={self.key_prefix!r})"

    def key(self, request_id: str) -> str:
        return f"{self.key_prefix}{{{request_id}}}"

    def epoch_key(self, scope: str) -> str:
        return f"{self.key_prefix}epoch:{scope}"

    async def load_many(self, request_ids: list[str]) -> dict[str, Stored | None]:
        if not request_ids:
            return {}
        async with self._client.pipeline(transaction=False) as pipe:
            for rid in request_ids:
                pipe.hmget(self.key(rid), [F_SEQ, F_STATE])
            self.round_trips += 1
            replies = await pipe.execute()
        out: dict[str, Stored | None] = {}
        for rid, (seq, blob) in zip(request_ids, replies, strict=True):
            # A hash without `seq` is not one of ours: treated as no state (a write
            # expecting none is then refused, since the key exists).
            out[rid] = None if seq is None else Stored(int(seq), blob if blob is not None else b"")
        return out

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        refused: list[int] = []
        pending = list(range(len(writes)))
        load_script = not self._script_loaded
        while pending:
            async with self._client.pipeline(transaction=False) as pipe:
                if load_script:
                    # First save of this store, or the server lost its script cache (a
                    # restart, a failover, SCRIPT FLUSH): load the script ahead of the
                    # writes, in the same round trip.
                    pipe.script_load(CAS_SCRIPT)
                for i in pending:
                    w = writes[i]
                    pipe.evalsha(
                        CAS_SHA,
                        1,
                        self.key(w.request_id),
                        "" if w.expected_seq is None else str(w.expected_seq),
                        str(w.seq),
                        str(w.epoch),
                        w.blob,
                        str(self._done_ttl_ms if w.done else self._ttl_ms),
                    )
                self.round_trips += 1
                replies = await pipe.execute(raise_on_error=False)
            if load_script:
                loaded = replies.pop(0)
                if isinstance(loaded, Exception):
                    raise loaded
                self._script_loaded = True
            no_script: list[int] = []
            for i, reply in zip(pending, replies, strict=True):
                if isinstance(reply, NoScriptError):
                    no_script.append(i)
                elif isinstance(reply, Exception):
                    # The caller retries the whole batch; writes already applied here
                    # are accepted again as the same write (see CAS_SCRIPT).
                    raise reply
                elif reply == 0:
                    refused.append(i)
            if no_script and load_script:
                raise RuntimeError("Redis lost the CAS script right after loading it")
            pending, load_script = no_script, bool(no_script)
        return [writes[i].request_id for i in sorted(refused)]

    async def claim_epoch(self, scope: str) -> int:
        self.round_trips += 1
        return int(await self._client.incr(self.epoch_key(scope)))

    async def close(self) -> None:
        await self._client.aclose()


if TYPE_CHECKING:

    def _satisfies_the_protocol(store: RedisStore) -> StateStore:
        return store
