"""A request's state in Redis: the hash's fields and the two Lua scripts that read and
write it (docs/integrate/contract.md, "State"), shared by every mode of
`redis_store.RedisStore` — the scripts in standalone mode, the same reads as single HMGETs
in cluster and proxy modes (`fields`, `triple`), the same CAS_SCRIPT everywhere — so no mode
can disagree on what a write may do. `memory_store.MemoryStore` implements the same rules in
Python.
"""

from __future__ import annotations

import hashlib
from typing import Any

from redis.exceptions import ResponseError

F_SEQ = "seq"
F_EPOCH = "epoch"
F_STATE = "state"
F_TABLES = "tables"
# Exactly-once's versions (see CAS_SCRIPT): the last offset of the batch that wrote the
# state, and the state before it.
VERSIONS = ("upto", "pseq", "pstate")

# KEYS: the requests' keys. ARGV: seven per key — expected seq ("" = the key must not
# exist; "-1" = the key held no hash when loaded), seq, epoch, state blob, TTL in ms, under
# exactly-once the input offsets "since first last" in the request's partition ("" otherwise:
# the first offset of the writing batch's transaction, the first and last offsets of the
# batch; one argument, not three: each argument costs the client's packing a few hundred
# ns), and the request's tables ("" = leave them: only the write that opens a request
# carries them). Returns one flag per key: 1 when applied (or when exactly this write is
# already stored), 0 when refused.
#
# Exactly-once keeps two versions: `seq`/`state` with `upto` (the last offset of the batch
# that wrote it) and `pseq`/`pstate`, the state before it. Redis is outside the Kafka
# transaction, so a batch can save and then see its transaction abort; its records are
# then read again from an offset at or below `upto`, and that batch (from any owner)
# builds on the state before, replacing the uncommitted one (LOAD_SCRIPT reads the same).
# A transaction may span batches (`--transaction-ms`): a state whose `upto` is at or past
# the transaction's first offset is the transaction's own, so a later batch of it replaces
# that state and keeps `pstate`, the state before the transaction, which an abort of the
# whole transaction goes back to.
CAS_SCRIPT = """
local WRONG_TYPE = '-1'
-- Seqs are compared as the decimal strings the client wrote, not as Lua numbers: those
-- are doubles, which cannot tell apart seqs above 2^53 (a seq may be up to 2^63 - 1).
-- Offsets are compared as numbers: a partition's offsets stay far below 2^53.
local function apply(key, expected, seq, epoch_s, blob, ttl, offsets, tables)
  local epoch = tonumber(epoch_s)
  local versioned = offsets ~= ''
  local since, first, last_s = 0, 0, ''
  if versioned then
    local since_s, first_s
    since_s, first_s, last_s = string.match(offsets, '^(%d+) (%d+) (%d+)$')
    since, first = tonumber(since_s), tonumber(first_s)
  end
  local shift = false
  -- (HMGET of a missing key answers all nils: one call instead of EXISTS + HMGET.)
  local ok, cur = pcall(redis.call, 'HMGET', key, 'seq', 'epoch', 'state', 'upto', 'pseq', 'pstate')
  if not ok then
    -- Not a hash (WRONGTYPE): the load reported it as seq -1 and the request failed;
    -- its failed state replaces the stray value. Otherwise it appeared since the load.
    if expected ~= WRONG_TYPE then
      return 0
    end
    redis.call('DEL', key)
  elseif cur[1] or cur[2] or cur[3] then
    local cur_epoch = tonumber(cur[2]) or 0
    -- Fencing: a newer owner has written this request; an older one may not.
    if cur_epoch > epoch then
      return 0
    end
    -- The same write again (a retry after a lost reply): it is already applied.
    if cur[1] == seq and cur_epoch == epoch and cur[3] == blob and (cur[4] or '') == last_s then
      redis.call('PEXPIRE', key, ttl)
      return 1
    end
    -- The state the batch built on: the stored one, or under exactly-once the one before
    -- it when the batch that stored it never committed (its records came back).
    local base = cur[1]
    local upto = tonumber(cur[4]) or -1
    if versioned and upto >= first then
      base = cur[5]
    end
    -- (A state this transaction wrote, or one that never committed, is not kept.)
    shift = versioned and upto < since
    if expected == '' then
      if base then
        return 0
      end
    elseif expected ~= base then
      return 0
    end
    if cur[4] and not versioned then
      redis.call('HDEL', key, 'upto', 'pseq', 'pstate')
    end
  elseif expected ~= '' then
    -- Expired or deleted since the batch loaded it.
    return 0
  end
  if shift then
    redis.call('HSET', key, 'seq', seq, 'epoch', epoch_s, 'state', blob, 'upto', last_s,
      'pseq', cur[1], 'pstate', cur[3])
  elseif versioned then
    redis.call('HSET', key, 'seq', seq, 'epoch', epoch_s, 'state', blob, 'upto', last_s)
  else
    redis.call('HSET', key, 'seq', seq, 'epoch', epoch_s, 'state', blob)
  end
  if tables ~= '' then
    redis.call('HSET', key, 'tables', tables)
  end
  redis.call('PEXPIRE', key, ttl)
  return 1
end
local out = {}
for i, key in ipairs(KEYS) do
  local b = (i - 1) * 7
  out[i] = apply(key, ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5],
    ARGV[b + 6], ARGV[b + 7])
end
return out
"""
# KEYS: the requests' keys; ARGV: two per key — under exactly-once the batch's first
# offset in the request's partition ("" otherwise), and "1" when the caller wants the
# request's tables ("" otherwise). Returns seq, state, tables, seq, state, tables, … (nil
# where a key or field is absent or the tables were not asked for; seq -1 and an empty
# state where a key holds no hash: see WRONG_TYPE_SEQ).
LOAD_SCRIPT = """
local out = {}
for i, key in ipairs(KEYS) do
  local first = ARGV[2 * i - 1]
  local ok, v
  if first ~= '' then
    ok, v = pcall(redis.call, 'HMGET', key, 'seq', 'state', 'tables', 'upto', 'pseq', 'pstate')
    -- Written by a batch whose records are being read again: it never committed.
    if ok and v[4] and tonumber(v[4]) >= tonumber(first) then
      v = {v[5], v[6], v[3]}
    end
  else
    ok, v = pcall(redis.call, 'HMGET', key, 'seq', 'state', 'tables')
  end
  if ok then
    out[3 * i - 2] = v[1]
    out[3 * i - 1] = v[2]
    out[3 * i] = ARGV[2 * i] == '1' and v[3]
  else
    out[3 * i - 2] = '-1'
    out[3 * i - 1] = ''
    out[3 * i] = false
  end
end
return out
"""
# A key under the prefix that holds no hash (a stray SET, a foreign tool): read as a state
# at this seq that does not decode, so its request fails with `state_corrupt` (one error
# output, the partition moves on) and the failed state's write, expecting this seq,
# replaces the value. Raised as WRONGTYPE it failed the whole batch, on every retry.
WRONG_TYPE_SEQ = -1
LOAD_SHA = hashlib.sha1(LOAD_SCRIPT.encode()).hexdigest()
CAS_SHA = hashlib.sha1(CAS_SCRIPT.encode()).hexdigest()
SCRIPTS = (CAS_SCRIPT, LOAD_SCRIPT)


def fields(versioned: bool, tables: bool) -> list[str]:
    """What one HMGET of the proxy and cluster modes' loads reads (LOAD_SCRIPT's order:
    seq, state, then the tables when asked for, then exactly-once's versions)."""
    return [F_SEQ, F_STATE, *((F_TABLES,) if tables else ()), *(VERSIONS if versioned else ())]


def triple(reply: Any, first: int, tables: bool) -> tuple[Any, Any, Any]:
    """One HMGET reply (`fields`) read as LOAD_SCRIPT reads it: (seq, state, tables) — a
    WRONGTYPE error as WRONG_TYPE_SEQ; under exactly-once, the state before one left by an
    uncommitted batch."""
    if isinstance(reply, ResponseError) and str(reply).startswith("WRONGTYPE"):
        return str(WRONG_TYPE_SEQ), b"", None
    if isinstance(reply, Exception):
        raise reply
    t = reply[2] if tables else None
    if first >= 0:
        upto, pseq, pstate = reply[-3:]
        if upto is not None and int(upto) >= first:
            return pseq, pstate, t
    return reply[0], reply[1], t
