"""The recorded families' answers (`tests/core/parsers/vllm_answers/`) asked of vLLM 0.33.0
again, live (`make parity`).

Per family one render server with the folder, parsers and served name the answers were
recorded with (`vllm_server.RECORDED_SPECS`; the folders: `recorded_models.py`). Every
case goes to it as it went to the probe that recorded it: the chat (the case's request and
messages) rendered by vLLM — the prompt's last 12 ids must be the recorded
`prompt_tail_ids` — and the output ids derendered whole (one call) and streamed (one token
a chunk, carrying the stream state; the stream folded into one answer as the probe folded
it, `stream_answer`). The probe's chat request did not say `stream: true`; ours does when
streaming, as a streaming client's does (drive.run_vllm): vLLM answers the same. vLLM's
live answers must be the recorded
ones (content, reasoning, tool-call names and arguments, finish reason; not ids): a
difference is a drift of vLLM or of the folders and fails naming the family and the case.
Ours is then checked against the live answers by the rule test_vllm_answers.py checks the
recorded ones with (`check_answer`, its DEVIATIONS included).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.recorded.families import DEVIATIONS, FAMILIES
from tests.core.parsers.recorded.test_vllm_answers import (
    check_answer,
    missing_parsers,
    recorded_cases,
)
from tests.peer.drive import RECORDED, Case, Gen, run_vllm
from tests.peer.parity import DOCUMENTED, EQUAL, FAILED, Recorded, Tally
from tests.peer.vllm_server import AUTO_TOOLS, RECORDED_SPECS

if TYPE_CHECKING:
    from tests.peer.vllm_server import Peer

pytestmark = pytest.mark.peer

TAIL = 12  # prompt ids recorded per case


def server(family: str) -> str:
    """The family's server in vllm_server.RECORDED_SPECS."""
    return f"{family}-{RECORDED}"


PARAMS = [
    pytest.param(
        family, n, id=f"{family}:{case['label']}", marks=pytest.mark.servers(server(family))
    )
    for family in FAMILIES
    for n, case in enumerate(recorded_cases(family))
]


def _answer(
    content: str | None, reasoning: str | None, calls: list[dict[str, Any]], finish: str | None
) -> dict[str, Any]:
    """The recorded shape of an answer."""
    return {
        "content": content,
        "reasoning": reasoning,
        "tool_calls": calls,
        "finish_reason": finish,
    }


def whole_answer(body: dict[str, Any]) -> dict[str, Any]:
    choice = body["choices"][0]
    m = choice["message"]
    calls = [
        {"name": t["function"]["name"], "arguments": t["function"]["arguments"]}
        for t in m.get("tool_calls") or []
    ]
    return _answer(m.get("content"), m.get("reasoning"), calls, choice.get("finish_reason"))


def stream_answer(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The stream folded as the probe folded it: texts joined (None when empty), calls as
    a list by index (an index never sent stays a nameless empty call: vLLM's ling3 skips a
    call to an unknown tool but counts it), a call's name its first, its arguments joined,
    the last finish reason."""
    content, reasoning, finish = "", "", None
    calls: list[dict[str, Any]] = []
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            d = choice.get("delta") or {}
            content += d.get("content") or ""
            reasoning += d.get("reasoning") or ""
            for tc in d.get("tool_calls") or []:
                while len(calls) <= tc["index"]:
                    calls.append({"name": None, "arguments": ""})
                call = calls[tc["index"]]
                fn = tc.get("function") or {}
                call["name"] = call["name"] or fn.get("name")
                call["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return _answer(content or None, reasoning or None, calls, finish)


@dataclass
class Live:
    prompt: list[int]
    whole: dict[str, Any]
    stream: dict[str, Any]
    calls: int


def ask(peer: Peer, family: str, case: dict[str, Any]) -> Live:
    """vLLM's answers to the case now: the prompt it renders, whole and 1-token streamed."""
    spec = RECORDED_SPECS[server(family)]
    chat = {"model": spec.served_name, "messages": case["messages"], **case["request"]}
    prompt = peer.render_chat(chat)
    ids = list(case["output_ids"])
    whole = Case(
        f"{family}:{case['label']}",
        spec.name,
        "chat",
        False,
        chat,
        [[Gen(ids, case["finish_in"])]],
        prompts=[prompt],
        extra={"model": spec.served_name},
    )
    # One token a chunk; an empty output is one empty chunk carrying the finish reason.
    streamed = replace(
        whole, stream=True, outputs=[[Gen(ids, case["finish_in"], cuts=[1] * len(ids) or [0])]]
    )
    answers = []
    for c in (whole, streamed):
        res = run_vllm(peer, c)
        if res.status != 200:
            pytest.fail(
                f"{c.name}: vLLM answered HTTP {res.status} ({'stream' if c.stream else 'whole'}, "
                f"call {res.error_at}): {res.error}\n{peer.server.log_tail()}",
                pytrace=False,
            )
        answers.append(res)
    assert answers[0].body is not None
    calls = 1 + sum(a.calls for a in answers)
    return Live(prompt, whole_answer(answers[0].body), stream_answer(answers[1].chunks), calls)


@functools.cache
def _tokenizer(family: str) -> Tokenizer:
    return FAMILIES[family].tokenizer()


def drift(family: str, case: dict[str, Any], live: Live) -> str | None:
    """What vLLM now answers otherwise than recorded, or None."""

    def show(ids: list[int]) -> str:
        return repr(_tokenizer(family).decode(ids, skip_special_tokens=False))

    out = []
    tail = live.prompt[-TAIL:]
    if tail != case["prompt_tail_ids"]:
        out.append(
            f"prompt tail\n  recorded: {case['prompt_tail_ids']} {show(case['prompt_tail_ids'])}"
            f"\n  live:     {tail} {show(tail)}"
        )
    for how in ("whole", "stream"):
        got = getattr(live, how)
        if got != case[how]:
            out.append(
                f"{how} answer\n  recorded: {json.dumps(case[how], ensure_ascii=False)}"
                f"\n  live:     {json.dumps(got, ensure_ascii=False)}"
            )
    if not out:
        return None
    return (
        f"vLLM drift: {family} {case['label']!r} is no longer answered as recorded in "
        f"tests/core/parsers/vllm_answers/{family}.jsonl:\n" + "\n".join(out)
    )


@pytest.mark.parametrize(("family", "n"), PARAMS)
def test_recorded(family: str, n: int, recorded_peer: Callable[[str], Peer], tally: Tally) -> None:
    case = recorded_cases(family)[n]
    live = ask(recorded_peer(server(family)), family, case)
    drifted = drift(family, case, live)
    missing = missing_parsers(family)
    ours: AssertionError | None = None
    if not missing:
        try:
            check_answer(
                family,
                {
                    **case,
                    "prompt_tail_ids": live.prompt[-TAIL:],
                    "whole": live.whole,
                    "stream": live.stream,
                },
            )
        except AssertionError as exc:
            ours = exc
    status = FAILED if ours else DOCUMENTED if case["label"] in DEVIATIONS[family] else EQUAL
    report = "\n\n".join(str(x) for x in (drifted, ours) if x)
    tally.add_recorded(Recorded(family, case["label"], drifted is None, status, live.calls, report))
    if drifted:
        pytest.fail(
            drifted + (f"\n\nours against the live answer: {ours}" if ours else ""), pytrace=False
        )
    if ours:
        raise ours
    if missing:
        pytest.skip(f"{family}: no {' and no '.join(missing)} in worker.core.parsers yet")


def test_servers_are_the_families() -> None:
    """Every recorded family has its server, with the parsers its answers are checked with."""
    assert set(RECORDED_SPECS) == {server(f) for f in FAMILIES}
    for family, fam in FAMILIES.items():
        flags = RECORDED_SPECS[server(family)].parser_args
        want = ("--reasoning-parser", fam.reasoning) if fam.reasoning else ()
        assert flags == (*want, "--tool-call-parser", fam.tools, *AUTO_TOOLS), family


def test_drift_names_family_and_label() -> None:
    """A live answer other than the recorded one is reported with the family, the case and
    both answers (no server needed)."""
    family = "gemma4"
    case = recorded_cases(family)[0]
    same = Live([0, *case["prompt_tail_ids"]], case["whole"], case["stream"], 0)
    assert drift(family, case, same) is None
    other = replace(same, whole={**case["whole"], "content": "changed"})
    report = drift(family, case, other)
    assert report is not None
    assert family in report and repr(case["label"]) in report and '"changed"' in report
    assert "stream answer" not in report
