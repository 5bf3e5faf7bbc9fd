"""The request's tables (core/tables.py) through the one loop: what a request brings at seq 0
and never changes is stored once beside the state, so the state and a batch's loads stay
the size of a plain request's whatever the number of tools or stop strings; outputs are
the same as with the lists in the state, for a worker that holds the tables and for one
that reads them back (after a rebalance); the bounds fail only their request."""

from __future__ import annotations

import itertools
import json
from collections.abc import Set as AbstractSet
from typing import Any

import msgspec
import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.samples import SETUPS, decoy_tools, golden_inputs
from tests.support.helpers import Run, end, registry
from tests.support.vocab.offline_tokenizers import offline_tokenizer
from worker.adapters.state.memory_store import MemoryStore
from worker.core.model import Registry
from worker.core.state import decode_state, encode_state
from worker.core.tables import RequestTables, TableCache
from worker.ports import Stored

# Families whose parsers read the tools: DSML (the call's flags), GLM (argument types from
# the schema), MiniMax M3 (types, and name checks).
FAMILIES = ["deepseek_v4", "glm47", "minimax_m3"]
# Stop strings the output never comes near (no character of theirs is written), so that a
# request with them streams exactly what one without them does.
UNUSED_STOPS = [f"\u2603{i}\u2604" for i in range(256)]


def tokenizer(name: str, deepseek: Tokenizer) -> Tokenizer:
    key = SETUPS[name].tokenizer
    if key == "glm":
        return offline_tokenizer("glm-4.7-flash")
    if key == "minimax_m3":
        return offline_tokenizer("minimax-m3")
    return deepseek


def family_registry(name: str, tok: Tokenizer, **limits: Any) -> Registry:
    s = SETUPS[name]
    reg = registry(tok, name="m", reasoning_parser=s.reasoning_parser, tool_parser=s.tool_parser)
    for k, v in limits.items():
        setattr(reg, k, v)
    return reg


def records(
    name: str, tok: Tokenizer, rid: str, tools: int, stops: int, step: int = 3
) -> list[dict[str, Any]]:
    """A golden answer of `name` as 3-token chunks; the request's real tools sit in the
    middle of `tools` decoys, with `stops` stop strings it never meets."""
    g = golden_inputs(SETUPS[name], tok)
    req = dict(g["chat_request"])
    half = decoy_tools(tools)
    req["tools"] = half[: tools // 2] + req["tools"] + half[tools // 2 :]
    if stops:
        req["stop"] = UNUSED_STOPS[:stops]
    ids = g["token_ids"]
    out: list[dict[str, Any]] = []
    for seq, lo in enumerate(range(0, len(ids), step)):
        last = lo + step >= len(ids)
        choice = {
            "index": 0,
            "token_ids": ids[lo : lo + step],
            "finish_reason": "stop" if last else None,
        }
        rec: dict[str, Any] = {
            "request_id": rid,
            "seq": seq,
            "generate_chunk": {"choices": [choice]},
        }
        if seq == 0:
            rec.update(prompt_token_ids=g["prompt_token_ids"], chat_request=req)
        out.append(rec)
    out.append(end(rid, len(out)))
    return out


def values(run: Run) -> list[bytes]:
    return [o.value for o in run.outputs]


class Watching(MemoryStore):
    """A MemoryStore that remembers what each load asked and got."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[set[str]] = []
        self.tables_loaded = 0
        self.state_bytes: list[int] = []

    async def load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None = None,
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        self.asked.append(set(tables_for))
        got = await super().load_many(request_ids, first_offsets, tables_for)
        for s in got.values():
            if s is not None:
                self.state_bytes.append(len(s.blob))
                self.tables_loaded += s.tables is not None
        return got


@pytest.mark.parametrize("name", FAMILIES)
def test_many_tools_and_stop_strings_change_no_output_byte(name: str, deepseek: Tokenizer) -> None:
    tok = tokenizer(name, deepseek)
    plain = Run(family_registry(name, tok))
    for rec in records(name, tok, "r", 0, 0):
        plain.feed(rec)
    assert any(json.loads(v).get("choices", [{}])[0].get("delta", {}).get("tool_calls")
               for v in values(plain)[:-1]), "the answer makes calls"  # fmt: skip
    for tools, stops in [(10, 4), (100, 64), (500, 256)]:
        big = Run(family_registry(name, tok))
        for rec in records(name, tok, "r", tools, stops):
            big.feed(rec)
        assert values(big) == values(plain), (tools, stops)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_state_does_not_grow_with_tools_or_stop_strings(name: str, deepseek: Tokenizer) -> None:
    """The state-size guard: every state a request stores, at every record, is the same
    size with 10 or 500 tools and 4 or 256 stop strings (the tables' digest is all it
    holds of them), and at most 24 bytes over a plain request's."""
    tok = tokenizer(name, deepseek)
    sizes: dict[tuple[int, int], list[int]] = {}
    for tools, stops in itertools.product([0, 10, 100, 500], [0, 4, 64, 256]):
        run = Run(family_registry(name, tok))
        seen = []
        for rec in records(name, tok, "r", tools, stops):
            run.feed(rec)
            stored = run.stored("r")
            assert stored is not None
            seen.append(len(stored.blob))
        sizes[tools, stops] = seen
    plain = sizes.pop((0, 0))
    first = next(iter(sizes.values()))
    for key, seen in sizes.items():
        assert seen == first, key
        assert all(s <= p + 24 for s, p in zip(seen, plain, strict=True)), (key, seen, plain)


@pytest.mark.parametrize("name", FAMILIES)
def test_a_worker_without_the_tables_reads_them_once(name: str, deepseek: Tokenizer) -> None:
    """A rebalance: a worker that never saw the request (a registry of its own, so a cold
    cache) takes over mid-stream from the same store. It asks for the request's tables
    on its first load only; the outputs are those of one uninterrupted worker."""
    tok = tokenizer(name, deepseek)
    recs = records(name, tok, "r", 100, 64)
    whole = Run(family_registry(name, tok))
    for rec in recs:
        whole.feed(rec)
    store = Watching()
    first = Run(family_registry(name, tok), store)
    half = len(recs) // 2
    for rec in recs[:half]:
        first.feed(rec)
    # The worker that opened the request held its tables: it never asked for them.
    assert store.tables_loaded == 0 and all(not a for a in store.asked[1:])
    second = Run(family_registry(name, tok), store)
    second.checkpoint.epochs = {None: 2}  # (the new owner's epoch)
    for rec in recs[half:]:
        second.feed(rec)
    assert values(first) + values(second) == values(whole)
    assert store.tables_loaded == 1
    assert store.asked[half] == {"r"} and all(not a for a in store.asked[half + 1 :])
    assert second.reg.tables.compiled == 1


def test_requests_with_the_same_tables_share_one_compiled_copy(deepseek: Tokenizer) -> None:
    reg = family_registry("deepseek_v4", deepseek)
    run = Run(reg)
    streams = [records("deepseek_v4", deepseek, f"r{i}", 100, 64) for i in range(5)]
    for batch in itertools.zip_longest(*streams):
        run.feed(*[r for r in batch if r is not None])
    assert reg.tables.compiled == 1
    assert run.results["failed"] == 0


def test_two_agents_tool_sets_are_kept_apart(deepseek: Tokenizer) -> None:
    """Requests of two tool sets interleaved: each set read and compiled once, and every
    request's outputs those it has alone (the memo by the tools' JSON never mixes them)."""
    reg = family_registry("glm47", offline_tokenizer("glm-4.7-flash"))
    tok = offline_tokenizer("glm-4.7-flash")
    streams = [records("glm47", tok, f"r{i}", 10 if i % 2 else 20, 0) for i in range(6)]
    run = Run(reg)
    for batch in itertools.zip_longest(*streams):
        run.feed(*[r for r in batch if r is not None])
    assert reg.tables.compiled == 2
    for i, recs in enumerate(streams):
        alone = Run(family_registry("glm47", tok))
        for rec in recs:
            alone.feed(rec)
        assert [o.value for o in run.outputs if o.key == f"r{i}"] == values(alone)


def test_a_small_cache_evicts_and_reads_back_from_the_store(deepseek: Tokenizer) -> None:
    """Twelve requests with tool sets of their own through a cache that holds ~2 of
    them: compiled tables and tool schemas stay within its bytes, evicted tables come
    back from the store when their request's next record needs them, and every request's
    outputs are those it has alone."""
    reg = family_registry("deepseek_v4", deepseek)
    reg.tables = TableCache(max_entries=1000, max_bytes=2_500)
    streams = [records("deepseek_v4", deepseek, f"r{i}", 10 + i, 4) for i in range(12)]
    run = Run(reg)
    for batch in itertools.zip_longest(*streams):
        run.feed(*[r for r in batch if r is not None])
        assert reg.tables._bytes <= 2_500 or len(reg.tables) == 1
        assert reg.tables._schema_bytes <= 2_500 or len(reg.tables._schemas) == 1
    assert reg.tables.compiled > 12  # evicted ones were compiled again from the store
    for i, recs in enumerate(streams):
        alone = Run(family_registry("deepseek_v4", deepseek))
        for rec in recs:
            alone.feed(rec)
        assert [o.value for o in run.outputs if o.key == f"r{i}"] == values(alone), i


def test_tables_lost_from_the_store_fail_their_request_only(deepseek: Tokenizer) -> None:
    tok = deepseek
    store = MemoryStore()
    recs = records("deepseek_v4", tok, "r", 10, 4)
    good = records("deepseek_v4", tok, "g", 0, 0)
    first = Run(family_registry("deepseek_v4", tok), store)
    first.feed(recs[0], good[0])
    store._entries[store.key("r")].tables = b""  # the store lost r's field (not its state)
    second = Run(family_registry("deepseek_v4", tok), store)
    for a, b in itertools.zip_longest(recs[1:], good[1:]):
        second.feed(*[r for r in (a, b) if r is not None])
    errors = [json.loads(o.value) for o in second.outputs if o.kind == "error"]
    assert [e["error"]["code"] for e in errors] == ["state_corrupt"]
    assert "tables" in errors[0]["error"]["message"]
    assert [o.key for o in second.outputs if o.kind == "error"] == ["r"]
    alone = Run(family_registry("deepseek_v4", tok))
    for rec in good:
        alone.feed(rec)
    assert [o.value for o in first.outputs + second.outputs if o.key == "g"] == values(alone)


@pytest.mark.parametrize("name", FAMILIES)
def test_a_state_with_its_lists_inline_still_reads(name: str, deepseek: Tokenizer) -> None:
    """A state stored before the tables existed holds its stop strings, stop ids and tools
    in itself: a worker reading it goes on exactly as one that had the tables."""
    tok = tokenizer(name, deepseek)
    recs = records(name, tok, "r", 10, 4)
    whole = Run(family_registry(name, tok))
    for rec in recs:
        whole.feed(rec)
    first = Run(family_registry(name, tok))
    half = len(recs) // 2
    for rec in recs[:half]:
        first.feed(rec)
    stored = first.stored("r")
    assert stored is not None
    state = decode_state(stored.blob)
    raw = msgspec.msgpack.decode(
        first.store._entries[first.store.key("r")].tables, type=RequestTables
    )
    state.opts.stop, state.opts.stop_token_ids = raw.stop, raw.stop_token_ids
    assert state.parser is not None and raw.tools
    state.parser.tools = list(raw.tools)
    for cs in state.choices:
        assert cs.parser is not None
        cs.parser.tools = list(raw.tools)
    state.tables = b""
    old = MemoryStore()
    second = Run(family_registry(name, tok), old)
    second.plant("r", stored.seq, encode_state(state))
    for rec in recs[half:]:
        second.feed(rec)
    assert values(first) + values(second) == values(whole)


# -- bounds -------------------------------------------------------------------------------

BOUNDS = [
    ("max_stop_strings", {"stop": UNUSED_STOPS[:9]}, {"max_stop_strings": 8}),
    ("max_stop_length", {"stop": ["x" * 33]}, {"max_stop_length": 32}),
    ("max_stop_token_ids", {"stop_token_ids": list(range(17))}, {"max_stop_token_ids": 16}),
    ("max_tools", {"tools": decoy_tools(5)}, {"max_tools": 4}),
    ("max_tools_bytes", {"tools": decoy_tools(5)}, {"max_tools_bytes": 1000}),
]


@pytest.mark.parametrize(("bound", "ask", "limits"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_a_request_over_a_bound_fails_alone(
    bound: str, ask: dict[str, Any], limits: dict[str, int], deepseek: Tokenizer
) -> None:
    reg = family_registry("deepseek_v4", deepseek, **limits)
    bad = records("deepseek_v4", deepseek, "bad", 0, 0)
    bad[0]["chat_request"] = {**bad[0]["chat_request"], **ask}
    good = [records("deepseek_v4", deepseek, f"g{i}", 0, 4) for i in range(2)]
    run = Run(reg)
    for batch in itertools.zip_longest(bad, *good):
        run.feed(*[r for r in batch if r is not None])
    errors = [json.loads(o.value)["error"] for o in run.outputs if o.kind == "error"]
    assert len(errors) == 1, errors
    (err,) = errors
    assert err["type"] == "invalid_request_error" and bound in err["message"], err
    assert [o.key for o in run.outputs if o.key == "bad"] == ["bad", "bad"]  # error, [DONE]
    for i in range(2):
        alone = Run(family_registry("deepseek_v4", deepseek))
        for rec in good[i]:
            alone.feed(rec)
        assert [o.value for o in run.outputs if o.key == f"g{i}"] == values(alone)


def test_bounds_are_checked_before_the_tokenizer_is_asked_anything(deepseek: Tokenizer) -> None:
    """A request over a bound that also carries prompt ids outside the vocabulary is
    refused for the bound: the lists are checked first."""
    reg = family_registry("deepseek_v4", deepseek, max_stop_strings=1)
    rec = records("deepseek_v4", deepseek, "r", 0, 2)[0]
    rec["prompt_token_ids"] = [10**9]
    run = Run(reg)
    run.feed(rec)
    (err,) = [json.loads(o.value)["error"] for o in run.outputs if o.kind == "error"]
    assert "max_stop_strings" in err["message"], err


def test_the_default_bounds_hold_the_benchmarks_requests(deepseek: Tokenizer) -> None:
    """500 tools and 256 stop strings are within the defaults; 10,000 stop strings are not."""
    run = Run(family_registry("deepseek_v4", deepseek))
    for rec in records("deepseek_v4", deepseek, "ok", 500, 256):
        run.feed(rec)
    assert run.results["failed"] == 0
    rec = records("deepseek_v4", deepseek, "big", 0, 0)[0]
    rec["chat_request"] = {**rec["chat_request"], "stop": [f"s{i}" for i in range(10_000)]}
    run.feed(rec)
    (err,) = [json.loads(o.value)["error"] for o in run.outputs if o.kind == "error"]
    assert "max_stop_strings = 256" in err["message"]
