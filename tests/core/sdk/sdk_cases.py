"""Generated cases for the SDK oracle (test_sdk_oracle.py): one request's generate
outputs, streamed as ChunkRecords and answered whole, through the one loop.

Chat: every registered reasoning / tool-call format (the parser properties' setups and
conversations, `tests/core/parsers/`) and a plain model; completions: the plain model.
Each of `n` = 1…3 choices gets its own output, cut at random, and the choices' records
interleave at random; logprobs (with top candidates), usage (final, continuous), stop
strings (plain text), `length` finishes, and an `abort` that cuts some choices short.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tests.core.parsers.properties.test_properties import PIECES, _tokenizer, conversations
from tests.core.parsers.shared.samples import SETUPS, chat_request
from tests.support.helpers import Run
from worker.core.model import Model, Registry

CREATED = 1767225600
PLAIN = "plain"
# Plain text: words of several scripts, emoji split across tokens, whitespace.
WORDS = [*PIECES, " naïve", " déjà", " 数据", " 🎉🎉", " Ωμέγα", " ok.", " —"]
STOPS = ["ok", "日本", "\n", "x=1", " world"]


@dataclass
class Case:
    api: str
    model: str
    n: int
    prompt: list[int]
    outputs: list[list[int]]  # per choice, every id the engine produced
    finishes: list[str]
    request: dict[str, Any]
    # Per choice, the chunk sizes; None cut: the whole output.
    cuts: list[list[int]]
    order: list[int]  # which choice's next record comes, in turn
    logprobs: bool = False
    top: int = 0
    include_usage: bool = False
    # Aborted: per choice, how many of its records go out before the `abort`.
    abort_after: list[int] | None = None
    reasoning_field: str = "reasoning"
    # Set by `run_case`: the stream's ChunkRecords and the whole response's record.
    records: list[dict[str, Any]] = field(default_factory=list)
    whole_record: dict[str, Any] = field(default_factory=dict)


@functools.cache
def registry() -> Registry:
    models = {PLAIN: Model(name=PLAIN, tokenizer=_tokenizer("deepseek"))}
    for name, s in SETUPS.items():
        models[name] = Model(
            name=name,
            tokenizer=_tokenizer(s.tokenizer),
            reasoning_parser=s.reasoning_parser,
            tool_parser=s.tool_parser,
            strict_tool_calling=s.strict,
            response_template=s.template,
        )
    return Registry(models, default=PLAIN)


def _entries(ids: list[int], top: int) -> list[dict[str, Any]]:
    """Generate logprobs (integer ids): the sampled id, then other candidates."""
    out = []
    for k, t in enumerate(ids):
        lp = -0.25 - k % 7 / 8
        cands = [(t, lp)] + [(c, -3.0 - j) for j, c in enumerate((100, 30594)[: max(top - 1, 0)])]
        out.append(
            {
                "token_id": t,
                "logprob": lp,
                "rank": 1,
                "top_logprobs": [
                    {"token_id": c, "logprob": v, "rank": r + 1} for r, (c, v) in enumerate(cands)
                ],
            }
        )
    return out


def _chunks(ids: list[int], sizes: list[int]) -> list[list[int]]:
    parts, i = [], 0
    for size in sizes:
        if i >= len(ids):
            break
        parts.append(ids[i : i + size])
        i += size
    if i < len(ids) or not parts:
        parts.append(ids[i:])
    return parts


def run_case(case: Case) -> tuple[list[bytes], bytes]:
    """The stream's output values (chunks, then `[DONE]`) and the whole response."""
    rid = f"{case.api}-sdk"
    request = dict(case.request)
    if case.api == "chat":
        request["logprobs"] = case.logprobs
        if case.logprobs:
            request["top_logprobs"] = case.top
    elif case.logprobs:
        request["logprobs"] = case.top
    key = "chat_request" if case.api == "chat" else "completion_request"
    whole_request = {k: v for k, v in request.items() if k != "stream_options"}
    context: dict[str, Any] = {
        "api": case.api,
        "model": case.model,
        "created": CREATED,
        "prompt_token_ids": case.prompt,
        "prompt_tokens": len(case.prompt),
    }
    per_choice = [_chunks(ids, c) for ids, c in zip(case.outputs, case.cuts, strict=True)]
    sent = [0] * case.n
    kept: list[list[int]] = [[] for _ in range(case.n)]
    finishes: list[str] = list(case.finishes)
    limit = case.abort_after or [len(p) for p in per_choice]
    records: list[dict[str, Any]] = []
    for index in case.order:
        if sent[index] >= min(limit[index], len(per_choice[index])):
            continue
        part = per_choice[index][sent[index]]
        sent[index] += 1
        last = sent[index] == len(per_choice[index])
        choice: dict[str, Any] = {
            "index": index,
            "token_ids": part,
            "finish_reason": case.finishes[index] if last else None,
        }
        if case.logprobs:
            at = len(kept[index])
            entries = _entries(case.outputs[index], case.top)[at : at + len(part)]
            choice["logprobs"] = {"content": entries}
        kept[index] += part
        rec: dict[str, Any] = {
            "request_id": rid,
            "seq": len(records),
            "generate_chunk": {"choices": [choice]},
        }
        if not records:
            stream_options = dict(request.pop("stream_options", None) or {})
            stream_options["include_usage"] = case.include_usage
            rec.update(context, **{key: dict(request, stream=True, stream_options=stream_options)})
        records.append(rec)
    for index in range(case.n):
        if sent[index] < len(per_choice[index]):
            finishes[index] = "abort"  # cut short by the abort
    kind = "abort" if case.abort_after is not None else "end"
    records.append({"request_id": rid, "seq": len(records), "type": kind})
    case.records = records
    stream = Run(registry())
    stream.feed(*records)
    whole_choices = []
    for index in range(case.n):
        ch: dict[str, Any] = {
            "index": index,
            "token_ids": kept[index],
            "finish_reason": finishes[index],
        }
        if case.logprobs:
            ch["logprobs"] = {"content": _entries(kept[index], case.top)}
        whole_choices.append(ch)
    whole_rec = {
        "request_id": rid,
        "seq": 0,
        "type": "response",
        **context,
        key: whole_request,
        "generate_response": {"choices": whole_choices},
    }
    case.whole_record = whole_rec
    whole = Run(registry())
    whole.feed(whole_rec)
    errors = [o.value for o in stream.outputs + whole.outputs if o.kind == "error"]
    assert not errors, errors
    (response,) = [o.value for o in whole.outputs if o.kind == "response"]
    return [o.value for o in stream.outputs], response


@st.composite
def _plan(draw: st.DrawFn, outputs: list[list[int]], api: str, model: str) -> Case:
    n = len(outputs)
    # A generate output says at least one token (vLLM refuses an empty whole one).
    tok = registry().models[model].tokenizer
    outputs = [ids or tok.encode(" ok.", add_special_tokens=False).ids for ids in outputs]
    cuts = [draw(st.lists(st.integers(1, 6), max_size=12), label="cuts") for _ in range(n)]
    rnd = random.Random(draw(st.integers(0, 2**32), label="interleave"))
    order = [i for i in range(n) for _ in range(len(_chunks(outputs[i], cuts[i])))]
    rnd.shuffle(order)
    logprobs = draw(st.booleans(), label="logprobs")
    aborted = draw(st.booleans().map(lambda b: b and rnd.random() < 0.3), label="abort")
    return Case(
        api=api,
        model=model,
        n=n,
        prompt=[],
        outputs=outputs,
        finishes=[draw(st.sampled_from(["stop", "stop", "length"])) for _ in range(n)],
        request={"n": n},
        cuts=cuts,
        order=order,
        logprobs=logprobs,
        top=draw(st.integers(0, 2)) if logprobs else 0,
        include_usage=draw(st.booleans(), label="include_usage"),
        # (at least one record each: a whole response has no choice without tokens)
        abort_after=[rnd.randint(1, 4) for _ in range(n)] if aborted else None,
    )


def _plain_ids(draw: st.DrawFn) -> list[int]:
    text = "".join(draw(st.lists(st.sampled_from(WORDS), max_size=12), label="text"))
    return list(_tokenizer("deepseek").encode(text, add_special_tokens=False).ids)


def _plain_request(draw: st.DrawFn, case: Case) -> None:
    if draw(st.booleans(), label="stop"):
        case.request["stop"] = draw(st.lists(st.sampled_from(STOPS), min_size=1, max_size=2))
    if case.include_usage and draw(st.booleans(), label="continuous"):
        case.request["stream_options"] = {"continuous_usage_stats": True}


@st.composite
def chat_cases(draw: st.DrawFn) -> Case:
    name = draw(st.sampled_from([PLAIN, *sorted(SETUPS)]), label="format")
    n = draw(st.integers(1, 3), label="n")
    if name == PLAIN:
        case = draw(_plan([_plain_ids(draw) for _ in range(n)], "chat", PLAIN))
        _plain_request(draw, case)
        case.prompt = [0]
        return case
    setup = SETUPS[name]
    tok = _tokenizer(setup.tokenizer)
    convs = [draw(conversations(setup), label="conversation") for _ in range(n)]
    outputs = [list(tok.encode(setup.render(c), add_special_tokens=False).ids) for c in convs]
    case = draw(_plan(outputs, "chat", name))
    # The first conversation's tools are every conversation's (names are shared).
    tools: dict[str, Any] = {}
    for c in convs:
        for t in chat_request(setup, c)["tools"]:
            tools.setdefault(t["function"]["name"], t)
    req = chat_request(setup, convs[0])
    req["tools"] = list(tools.values())
    case.request.update(req)
    case.prompt = list(tok.encode(setup.prompt_tail, add_special_tokens=False).ids)
    return case


@st.composite
def completion_cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 3), label="n")
    case = draw(_plan([_plain_ids(draw) for _ in range(n)], "completion", PLAIN))
    _plain_request(draw, case)
    case.prompt = list(_tokenizer("deepseek").encode("Once upon", add_special_tokens=False).ids)
    return case
