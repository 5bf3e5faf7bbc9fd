"""A seeded corpus of bad input: valid ChunkRecords of every kind, then mutated.

Mutations: flipped, inserted and deleted bytes, truncation, invalid UTF-8, duplicate keys,
non-JSON values; wrong types anywhere in the tree, missing fields, unknown fields, nested
garbage (deep lists and objects), huge and negative numbers, negative and out-of-vocabulary
token ids, too many choices, a key that is not the request_id, oversized records.

Every request id in the corpus starts with `fz-` (one record) or `fm-` (a valid stream with
one mutated record), so the corpus never touches the good requests it is mixed with.
The same seed gives the same corpus.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

# Integers around every boundary a decoder or msgpack could trip on.
HUGE = [
    -(2**100),
    -(2**64),
    -(2**63) - 1,
    -(2**63),
    -(2**31),
    -1,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    2**100,
    10**400,
]
WORDS = ["stop", "x", "", "\u0000", "😀", "\ud7ff", "é", "a" * 300, "</think>", "token_id:5"]


@dataclass
class Item:
    key: str | None
    value: bytes
    what: str  # which mutation made it ("valid" for none), for failure messages


class Corpus:
    def __init__(self, seed: int, vocab_size: int, max_record_bytes: int) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocab_size
        self.limit = max_record_bytes
        self.n = 0

    # -- valid records -------------------------------------------------------------------

    def ids(self, lo: int = 0, hi: int = 12) -> list[int]:
        return [self.rng.randrange(100, 20000) for _ in range(self.rng.randint(lo, hi))]

    def request(self) -> dict[str, Any]:
        r = self.rng
        req: dict[str, Any] = {}
        if r.random() < 0.5:
            req["stream_options"] = {
                "include_usage": r.random() < 0.5,
                "continuous_usage_stats": r.random() < 0.3,
            }
        if r.random() < 0.4:
            req["stop"] = r.sample(["ab", "x", "hello", "\n", "😀"], r.randint(1, 3))
        if r.random() < 0.3:
            req["logprobs"] = True
            req["top_logprobs"] = r.randint(0, 3)
        if r.random() < 0.2:
            req["n"] = r.randint(1, 3)
        if r.random() < 0.2:
            req["skip_special_tokens"] = False
        if r.random() < 0.2:
            req["tools"] = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
        return req

    def choice(
        self, index: int = 0, finish: bool = False, logprobs: bool = False
    ) -> dict[str, Any]:
        ids = self.ids(1)
        c: dict[str, Any] = {"index": index, "token_ids": ids}
        if finish:
            c["finish_reason"] = self.rng.choice(["stop", "length"])
        if logprobs:
            c["logprobs"] = {
                "content": [
                    {"token_id": t, "logprob": -0.5, "rank": 1, "top_logprobs": []} for t in ids
                ]
            }
        return c

    def valid(self, rid: str, seq: int, kind: str | None = None) -> dict[str, Any]:
        """A plausible record for `rid` at `seq` (of any type unless `kind` is given)."""
        r = self.rng
        kind = kind or r.choices(["chunk", "response", "end", "abort"], [8, 2, 2, 1])[0]
        rec: dict[str, Any] = {"request_id": rid, "seq": seq}
        if kind != "chunk":
            rec["type"] = kind
        if seq == 0 or r.random() < 0.1:
            api = r.choice(["chat", "chat", "completion"])
            rec["api"] = api
            rec[f"{api}_request"] = self.request()
            if r.random() < 0.5:
                rec["prompt_token_ids"] = self.ids(1, 20)
            if r.random() < 0.3:
                rec["created"] = r.randrange(0, 2_000_000_000)
            if r.random() < 0.2:
                rec["model"] = r.choice([None, "deepseek-v4", "no-such-model"])
        logprobs = bool(rec.get("chat_request", {}).get("logprobs"))
        if kind == "chunk":
            chunk: dict[str, Any] = {
                "choices": [self.choice(finish=r.random() < 0.2, logprobs=logprobs)]
            }
            if r.random() < 0.2:
                chunk["usage"] = {
                    "prompt_tokens": r.randint(0, 50),
                    "completion_tokens": r.randint(0, 50),
                }
            rec["generate_chunk"] = chunk
        elif kind == "response":
            rec["generate_response"] = {"choices": [self.choice(finish=True)]}
        return rec

    # -- mutations -----------------------------------------------------------------------

    def paths(self, node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        out = [at]
        if isinstance(node, dict):
            for k, v in node.items():
                out += self.paths(v, (*at, k))
        elif isinstance(node, list):
            for i, v in enumerate(node[:5]):
                out += self.paths(v, (*at, i))
        return out

    def junk(self, depth: int = 0) -> Any:
        r = self.rng
        pick = r.randrange(10 if depth < 3 else 7)
        if pick == 0:
            return r.choice(HUGE)
        if pick == 1:
            return r.random() * r.choice([1, -1, 1e300])
        if pick == 2:
            return r.choice(WORDS)
        if pick == 3:
            return r.choice([True, False, None])
        if pick == 4:
            return r.randint(-5, 5)
        if pick == 5:
            return []
        if pick == 6:
            return {}
        if pick == 7:
            return [self.junk(depth + 1) for _ in range(r.randint(1, 4))]
        if pick == 8:
            return {r.choice([*WORDS, "seq", "index", "token_ids"]): self.junk(depth + 1)}
        return self.nested(r.randint(1, 60))

    def nested(self, depth: int) -> Any:
        node: Any = self.rng.choice([0, "x", None])
        for _ in range(depth):
            node = [node] if self.rng.random() < 0.5 else {"a": node}
        return node

    def put(self, rec: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
        node: Any = rec
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value

    def mutate_tree(self, rec: dict[str, Any]) -> str:
        r = self.rng
        how = r.randrange(9)
        paths = [p for p in self.paths(rec) if p]
        path = r.choice(paths)
        if how == 0:
            self.put(rec, path, self.junk())
            return f"junk at {path}"
        if how == 1:
            node: Any = rec
            for p in path[:-1]:
                node = node[p]
            del node[path[-1]]
            return f"removed {path}"
        if how == 2:
            ints = [p for p in paths if isinstance(self.get(rec, p), int)]
            if ints:
                at = r.choice(ints)
                self.put(rec, at, r.choice(HUGE))
                return f"huge number at {at}"
            return "no int to blow up"
        if how == 3:
            rec[r.choice(WORDS) or "extra"] = self.junk()
            dicts = [p for p in self.paths(rec) if isinstance(self.get(rec, p), dict)]
            at = r.choice(dicts)
            self.get(rec, at)["unknown_" + str(r.randrange(99))] = self.junk()
            return f"unknown fields (and at {at})"
        if how == 4:
            self.put(rec, path, self.nested(r.choice([10, 100, 400])))
            return f"nested garbage at {path}"
        if how == 5:
            gc = rec.get("generate_chunk") or rec.get("generate_response")
            if isinstance(gc, dict) and gc.get("choices"):
                ids = gc["choices"][0].setdefault("token_ids", [])
                bad = r.choice([-1, -(2**40), self.vocab, self.vocab + 7, 2**40])
                ids.insert(r.randint(0, len(ids)), bad)
                return f"token id {bad}"
            rec["prompt_token_ids"] = [1, -3, self.vocab]
            return "bad prompt ids"
        if how == 6:
            gc = rec.get("generate_chunk")
            if isinstance(gc, dict):
                gc["choices"] = [self.choice(i) for i in range(r.randint(2, 4))]
                return "several choices"
            rec["seq"] = r.choice([-1, -(2**70), 2**70, 1.5, "0", None])
            return f"seq {rec['seq']!r}"
        if how == 7:
            rec["type"] = r.choice(["chunk", "response", "end", "abort", "bogus", "", 5])
            rec["api"] = r.choice(["chat", "completion", "embeddings", None, 1])
            return "type/api shuffled"
        ints = [p for p in paths if isinstance(self.get(rec, p), int)]
        for at in r.sample(ints, min(len(ints), 3)):
            self.put(rec, at, r.choice([-1, -(2**31), 2**31, 2**62]))
        return "numbers out of bounds"

    def get(self, rec: Any, path: tuple[Any, ...]) -> Any:
        for p in path:
            rec = rec[p]
        return rec

    def mutate_bytes(self, value: bytes) -> tuple[bytes, str]:
        r = self.rng
        b = bytearray(value)
        how = r.randrange(10)
        if how == 0:
            for _ in range(r.randint(1, 5)):
                b[r.randrange(len(b))] ^= 1 << r.randrange(8)
            return bytes(b), "flipped bits"
        if how == 1:
            return bytes(b[: r.randrange(len(b))]), "truncated"
        if how == 2:
            at = r.randrange(len(b))
            return bytes(b[:at] + r.randbytes(r.randint(1, 8)) + b[at:]), "inserted bytes"
        if how == 3:
            at = r.randrange(len(b))
            return bytes(b[:at] + b[at + r.randint(1, 20) :]), "deleted bytes"
        if how == 4:
            return bytes(b).replace(b'"', b'"\xff', 1), "invalid UTF-8"
        if how == 5:
            return b'{"seq": 0, ' + bytes(b[1:]), "duplicate key"
        if how == 6:
            return r.choice(
                [b"", b" ", b"null", b"[]", b'"str"', b"0", b"NaN", b"\xef\xbb\xbf{}"]
            ), "not an object"
        if how == 7:
            return bytes(b).replace(b"}", b', "x": NaN}', 1), "NaN literal"
        if how == 8:
            return bytes(b) + bytes(b), "two objects"
        depth = r.choice([900, 1000, 3000, 50000])
        deep = b"[" * depth + b"]" * depth
        return bytes(b[:-1]) + b', "deep": ' + deep + b"}", f"nested {depth} deep"

    # -- items -----------------------------------------------------------------------------

    def item(self) -> list[Item]:
        """One bad record (its own request), or a short stream with one bad record."""
        r = self.rng
        self.n += 1
        if r.random() < 0.15:
            return self.stream(f"fm-{self.n}")
        rid = f"fz-{self.n}"
        rec = self.valid(rid, r.choice([0, 0, 0, 1, 5]))
        key: str | None = rid
        pick = r.random()
        if pick < 0.45:
            what = self.mutate_tree(rec)
            value = json.dumps(rec).encode()
        elif pick < 0.8:
            value, what = self.mutate_bytes(json.dumps(rec).encode())
        elif pick < 0.87:
            rec["request_id"] = f"fz-{self.n}-other"
            value, what = json.dumps(rec).encode(), "key is not the request_id"
        elif pick < 0.92:
            rec["padding"] = "p" * (self.limit + r.randint(0, 100))
            value, what = json.dumps(rec).encode(), "oversized"
        elif pick < 0.95:
            value, what = b"\x00" * (self.limit + 1), "oversized binary"
        else:
            value, what = json.dumps(rec).encode(), "valid"
        if r.random() < 0.03:
            key = None
        return [Item(key, value, what)]

    def stream(self, rid: str) -> list[Item]:
        n = self.rng.randint(2, 6)
        recs = [self.valid(rid, seq, "chunk") for seq in range(n)]
        recs.append({"request_id": rid, "seq": n, "type": "end"})
        bad = self.rng.randrange(len(recs))
        items = [Item(rid, json.dumps(rec).encode(), "valid") for rec in recs]
        if self.rng.random() < 0.5:
            what = self.mutate_tree(recs[bad])
            items[bad] = Item(rid, json.dumps(recs[bad]).encode(), what)
        else:
            value, what = self.mutate_bytes(items[bad].value)
            items[bad] = Item(rid, value, what)
        return items

    def items(self, count: int) -> list[Item]:
        out: list[Item] = []
        while len(out) < count:
            out += self.item()
        return out


def corpus(seed: int, count: int, vocab_size: int, max_record_bytes: int) -> list[Item]:
    return Corpus(seed, vocab_size, max_record_bytes).items(count)
