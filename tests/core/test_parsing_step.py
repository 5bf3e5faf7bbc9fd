"""Reasoning and tool-call parsing through `step`: the parser's state rides in the request
state (msgpack between records), and the stream says what the whole response says."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.core.parsers.shared.samples import GOLDEN, SETUPS, golden_inputs
from tests.support.examples import examples
from tests.support.helpers import Run, end, registry
from worker.core.model import Registry

_settings = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def reg(deepseek: Tokenizer) -> Registry:
    return registry(
        deepseek, name="deepseek-v4", reasoning_parser="deepseek_v4", tool_parser="deepseek_v4"
    )


def stream(
    run: Run, rid: str, ids: list[int], cuts: list[int], first: dict[str, Any], index: int = 0
) -> None:
    bounds = [0, *[c for c in cuts if 0 < c < len(ids)], len(ids)]
    for n, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        choice = {
            "index": index,
            "token_ids": ids[lo:hi],
            "finish_reason": "stop" if hi == len(ids) else None,
        }
        rec: dict[str, Any] = {"request_id": rid, "seq": n, "generate_chunk": {"choices": [choice]}}
        if n == 0:
            rec.update(first)
        run.feed(rec)
    run.feed(end(rid, len(bounds) - 1))


def assemble(run: Run) -> dict[str, Any]:
    """Merge a stream the way a client does, checking the streaming rules on the way."""
    content = reasoning = ""
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    roles = 0
    for v in run.values("chunk"):
        for c in v["choices"]:
            d = c["delta"]
            roles += d.get("role") == "assistant"
            content += d.get("content") or ""
            reasoning += d.get("reasoning") or ""
            for tc in d.get("tool_calls") or []:
                fn = tc.get("function") or {}
                if "id" in tc:  # the header: once, before any argument
                    assert tc["index"] not in calls
                    calls[tc["index"]] = {"id": tc["id"], "name": fn["name"], "arguments": ""}
                call = calls[tc["index"]]
                before = call["arguments"]
                call["arguments"] += fn.get("arguments") or ""
                assert call["arguments"].startswith(before)  # only ever appends
            finish = c["finish_reason"] or finish
    assert roles == 1
    return {"content": content, "reasoning": reasoning, "calls": calls, "finish": finish}


@_settings
@given(data=st.data())
def test_streamed_split_equals_the_whole_response(
    reg: Registry, deepseek: Tokenizer, data: st.DataObject
) -> None:
    g = golden_inputs(SETUPS["deepseek_v4"], deepseek)
    ids = g["token_ids"]
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(ids) - 1), max_size=30))))
    first = {"prompt_token_ids": g["prompt_token_ids"], "chat_request": g["chat_request"]}
    run = Run(reg)
    stream(run, "r", ids, cuts, first)
    got = assemble(run)
    whole = Run(reg)
    whole.feed(
        {
            "request_id": "r",
            "seq": 0,
            "type": "response",
            **first,
            "generate_response": {"choices": [{"index": 0, "token_ids": ids}]},
        }
    )
    (resp,) = whole.values("response")
    msg = resp["choices"][0]["message"]
    assert got["reasoning"] == msg["reasoning"] == GOLDEN.reasoning
    assert got["content"] == msg["content"]
    assert GOLDEN.content in got["content"]
    streamed = [(c["id"], c["name"], c["arguments"]) for _, c in sorted(got["calls"].items())]
    assert streamed == [
        (t["id"], t["function"]["name"], t["function"]["arguments"]) for t in msg["tool_calls"]
    ]
    assert [json.loads(a) for _, _, a in streamed] == [c.args for c in GOLDEN.calls]
    assert got["finish"] == resp["choices"][0]["finish_reason"] == "tool_calls"
    for marker in ("<think>", "</think>", "｜DSML｜"):
        assert marker not in got["content"] + got["reasoning"]


def test_tool_call_ids_are_deterministic_and_differ_per_choice(
    reg: Registry, deepseek: Tokenizer
) -> None:
    g = golden_inputs(SETUPS["deepseek_v4"], deepseek)
    first = {
        "prompt_token_ids": g["prompt_token_ids"],
        "chat_request": {**g["chat_request"], "n": 2},
    }
    ids_seen = []
    for _ in range(2):
        run = Run(reg)
        recs = []  # both choices of one request, interleaved record by record
        for i in range(0, len(g["token_ids"]), 4):
            for index in (0, 1):
                part = g["token_ids"][i : i + 4]
                last = i + 4 >= len(g["token_ids"])
                choice = {
                    "index": index,
                    "token_ids": part,
                    "finish_reason": "stop" if last else None,
                }
                rec: dict[str, Any] = {
                    "request_id": "r",
                    "seq": len(recs),
                    "generate_chunk": {"choices": [choice]},
                }
                if not recs:
                    rec.update(first)
                recs.append(rec)
        for rec in recs:
            run.feed(rec)
        heads = [
            (c["index"], tc["index"], tc["id"])
            for v in run.values("chunk")
            for c in v["choices"]
            for tc in c["delta"].get("tool_calls") or []
            if "id" in tc
        ]
        ids_seen.append(heads)
    assert ids_seen[0] == ids_seen[1]  # replay gives the same ids
    assert len({h[2] for h in ids_seen[0]}) == len(ids_seen[0]) == 4  # 2 calls x 2 choices


def test_include_reasoning_false_hides_reasoning_and_its_logprobs(
    reg: Registry, deepseek: Tokenizer
) -> None:
    prompt = deepseek.encode("<｜User｜>hi<｜Assistant｜><think>", add_special_tokens=False).ids
    ids = deepseek.encode("secret plan</think>Hello!", add_special_tokens=False).ids
    content = [{"token_id": t, "logprob": -0.5, "top_logprobs": []} for t in ids]
    run = Run(reg)
    run.feed(
        {
            "request_id": "r",
            "seq": 0,
            "prompt_token_ids": prompt,
            "chat_request": {"include_reasoning": False, "logprobs": True},
            "generate_chunk": {
                "choices": [
                    {
                        "index": 0,
                        "token_ids": ids,
                        "finish_reason": "stop",
                        "logprobs": {"content": content},
                    }
                ]
            },
        }
    )
    got = assemble(run)
    assert got["reasoning"] == "" and got["content"] == "Hello!"
    shown = "".join(
        e["token"]
        for v in run.values("chunk")
        for c in v["choices"]
        for e in (c["logprobs"] or {}).get("content") or []
    )
    assert "secret" not in shown and "Hello" in shown


@pytest.mark.parametrize(
    ("prompt_tail", "kwargs", "expect"),
    [
        ("<｜Assistant｜></think>", None, "content"),  # chat-mode prompt: no reasoning
        ("<｜Assistant｜><think>", None, "reasoning"),
        ("<｜Assistant｜>", {"thinking": False}, "content"),
        ("<｜Assistant｜>", None, "reasoning"),  # DeepSeek V4 thinks by default
    ],
)
def test_start_state_from_prompt_then_kwargs_then_default(
    reg: Registry,
    deepseek: Tokenizer,
    prompt_tail: str,
    kwargs: dict[str, Any] | None,
    expect: str,
) -> None:
    prompt = deepseek.encode("<｜User｜>hi" + prompt_tail, add_special_tokens=False).ids
    ids = deepseek.encode("Plain words.", add_special_tokens=False).ids
    run = Run(reg)
    req: dict[str, Any] = {"chat_template_kwargs": kwargs} if kwargs else {}
    stream(run, "r", ids, [1, 2], {"prompt_token_ids": prompt, "chat_request": req})
    got = assemble(run)
    assert got[expect] == "Plain words."


def test_parser_state_stays_bounded(reg: Registry, deepseek: Tokenizer) -> None:
    ids = deepseek.encode(
        "think " * 3000 + "</think>" + "answer " * 3000, add_special_tokens=False
    ).ids
    run = Run(reg)
    sizes = []
    for n in range(0, len(ids), 50):
        rec: dict[str, Any] = {
            "request_id": "r",
            "seq": n // 50,
            "generate_chunk": {"choices": [{"index": 0, "token_ids": ids[n : n + 50]}]},
        }
        run.feed(rec)
        stored = run.stored("r")
        assert stored is not None
        sizes.append(len(stored.blob))
    assert max(sizes) < 200
    assert sizes[-1] <= sizes[len(sizes) // 4] + 8
