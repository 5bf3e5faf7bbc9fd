"""Our derender against vLLM 0.33.0's, case by case (`make parity`).

Every case is sent to the matching vLLM render server and, as ChunkRecords, through our
pipeline; the normalised answers must be equal, or differ only in documented ways
(`differences.py`). A case that differs otherwise fails with the field paths and both
values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.offline_tokenizers import offline_tokenizer
from tests.peer import cases as C
from tests.peer import cases_families as F
from tests.peer import cases_llama as L
from tests.peer.drive import Case, Gen
from tests.peer.parity import FAILED, Outcome, Prompts, Tally, run_case
from worker.adapters.tokenizers import load_tokenizer
from worker.config import load_registry

pytestmark = pytest.mark.peer

TOKENIZER = load_registry().models["deepseek-v4"].tokenizer
LLAMA = load_tokenizer(L.LLAMA_TOKENIZER, Path.cwd())[0]
FAMILY_TOKENIZERS = {fam.prefix: offline_tokenizer(fam.data) for fam in F.FAMILIES}
CASES = C.build(TOKENIZER) + L.build(LLAMA) + F.build_all()


def _check(case: Case, peers: Any, registries: Any, prompts: Prompts, tally: Tally) -> Outcome:
    return run_case(case, peers[case.server], registries[case.server], prompts, tally)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case, peers: Any, registries: Any, prompts: Prompts, tally: Tally) -> None:
    outcome = _check(case, peers, registries, prompts, tally)
    if outcome.status == FAILED:
        pytest.fail(outcome.report(), pytrace=False)


# --------------------------------------------------------------------------- hypothesis

# Each example is one case, counted like the generated ones; failures are collected
# and reported together after the run (no shrinking: every example costs vLLM calls).
EXAMPLES = 60
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

CHARS = list("abcxyz ABC .,!?-:'\"()[]{}<>/\\_\n\t0123") + list(
    "éüñ日本語中文한국어😀🦜🧬🎉👍🏽\u0301\u200d—…"
)
text = st.text(alphabet=st.sampled_from(CHARS), min_size=1, max_size=40)
arg_value = st.one_of(
    text,
    st.integers(-1000, 10**6),
    st.booleans(),
    st.lists(st.integers(0, 9), max_size=3),
)
tool_call = st.tuples(
    st.sampled_from(["get_weather", "search"]),
    st.dictionaries(st.sampled_from(["location", "days", "query", "limit"]), arg_value, max_size=3),
)


def _cuts(draw: Any, n: int) -> list[int]:
    if n == 0:
        return [0]
    style = draw(st.sampled_from(["one", "fixed", "random"]))
    if style == "one":
        return [1] * n
    if style == "fixed":
        k = draw(st.integers(2, 12))
        return [k] * (n // k) + ([n % k] if n % k else [])
    out, left = [], n
    while left:
        k = draw(st.integers(1, min(left, 50)))
        out.append(k)
        left -= k
    return out


@st.composite
def conversations(draw: Any) -> Case:
    """Parsers on: optional reasoning, content, 0–2 DSML calls under any tool_choice
    (strict tool calling), EOS or length; streamed in random chunks or whole."""
    b = C.Builder(TOKENIZER)
    think = draw(st.booleans())
    reasoning = draw(text) if think else ""
    content = draw(st.one_of(st.just(""), text))
    calls = draw(st.lists(tool_call, max_size=2))
    ids: list[int] = []
    if think:
        ids += b.ids(reasoning) + ([C.END_THINK] if content or calls or draw(st.booleans()) else [])
    if content:
        ids += b.ids(content)
    if calls:
        ids += b.ids(("\n\n" if content else "") + C.dsml(calls))
    if not ids:
        ids = b.ids("ok")
    finish = draw(st.sampled_from(["stop", "length"]))
    if finish == "stop":
        ids.append(C.EOS)
    extra: dict[str, Any] = {} if think else dict(C.NO_THINK)
    if calls or draw(st.booleans()):
        extra["tools"] = C.TOOLS
        # Strict tool calling (server "on"): every mode reads the model's own format.
        choice = draw(st.sampled_from([None, "auto", "none", "required", "named"]))
        if choice == "named":
            extra["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        elif choice is not None:
            extra["tool_choice"] = choice
    stream = draw(st.booleans())
    if stream and draw(st.booleans()):
        extra["stream_options"] = {"include_usage": True}
    req = C.chat_request(**extra)
    g = Gen(ids, finish, cuts=_cuts(draw, len(ids)) if stream else None)
    usage = "final" if "stream_options" in extra else "none"
    return Case("hypothesis-conversation", "on", "chat", stream, req, [[g]], engine_usage=usage)


@st.composite
def plain_outputs(draw: Any) -> Case:
    """No parsers: chat or completion text, special tokens, logprobs, random chunks."""
    b = C.Builder(TOKENIZER, seed=draw(st.integers(0, 2**16)))
    pieces = draw(
        st.lists(
            st.one_of(text, st.sampled_from([[C.BOS], [C.PAD], [C.THINK]])), min_size=1, max_size=4
        )
    )
    ids: list[int] = []
    for p in pieces:
        ids += p if isinstance(p, list) else b.ids(p)
    ids = ids[:150]
    finish = draw(st.sampled_from(["stop", "length"]))
    if finish == "stop":
        ids.append(C.EOS)
    api = draw(st.sampled_from(["chat", "completion"]))
    extra: dict[str, Any] = {"skip_special_tokens": draw(st.booleans())}
    top = draw(st.one_of(st.none(), st.integers(0, 4)))
    logprobs = None
    if top is not None:
        if api == "chat":
            extra.update(logprobs=True, top_logprobs=top)
            logprobs = b.logprobs(ids, top)
        else:
            extra["logprobs"] = top
            logprobs = b.logprobs(ids, top + 1)
    stream = draw(st.booleans())
    req = C.chat_request(**extra) if api == "chat" else C.completion_request(**extra)
    g = Gen(ids, finish, logprobs=logprobs, cuts=_cuts(draw, len(ids)) if stream else None)
    return Case("hypothesis-plain", "off", api, stream, req, [[g]])


@st.composite
def llama_conversations(draw: Any) -> Case:
    """The llama3_json tool parser: prose, 0–2 calls (after `<|python_tag|>` or bare, at
    the start or after the prose, `; `-separated), under any tool_choice on both strict
    settings (strict off, a forced choice's output is its constrained JSON); an EOS id or
    length; streamed in random chunks or whole."""
    b = C.Builder(LLAMA, alternatives=L.ALTERNATIVES)
    server = draw(st.sampled_from(L.TOOL_SERVERS))
    choice = draw(st.sampled_from([None, "auto", "none", "required", "named"]))
    tools = choice is not None or draw(st.booleans())
    items = draw(st.lists(tool_call, max_size=2))
    prose = draw(st.one_of(st.just(""), text))
    forced = choice in ("required", "named")
    if server == "llama-lax" and forced and items:
        # What guided decoding lets the model write without strict tool calling.
        if choice == "required":
            out = json.dumps([{"name": n, "parameters": a} for n, a in items], ensure_ascii=False)
            shape = "json-required"
        else:
            out, shape = json.dumps(items[0][1], ensure_ascii=False), "json-named"
    elif items:
        tag = draw(st.booleans())
        out, shape = L.calls(items, tag=tag), "python-tag" if tag else "bare"
        if prose and draw(st.booleans()):
            out = prose + draw(st.sampled_from(["\n", " ", "\n\n"])) + out
            shape = "prose-then-call"
    else:
        out, shape = prose, "prose"
    ids = b.ids(out) if out else b.ids("ok")
    finish = draw(st.sampled_from(["stop", "stop", "length"]))
    stop_reason: int | None = None
    if finish == "stop":
        eos = draw(st.sampled_from([L.EOT, L.EOM, L.END_OF_TEXT]))
        ids.append(eos)
        stop_reason = None if eos == L.END_OF_TEXT or draw(st.booleans()) else eos
    extra: dict[str, Any] = {}
    if tools:
        extra["tools"] = C.TOOLS
        if choice == "named":
            extra["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        elif choice is not None:
            extra["tool_choice"] = choice
    stream = draw(st.booleans())
    if stream and draw(st.booleans()):
        extra["stream_options"] = {"include_usage": True}
    req = L.chat_request(**extra)
    g = Gen(ids, finish, stop_reason, cuts=_cuts(draw, len(ids)) if stream else None)
    usage = "final" if "stream_options" in extra else "none"
    case = Case("hypothesis-llama", server, "chat", stream, req, [[g]], engine_usage=usage)
    case.extra["shape"] = shape
    return case


@st.composite
def llama_plain(draw: Any) -> Case:
    """Llama, no parser: chat or completion text with special tokens, logprobs, EOS ids,
    random chunks."""
    b = C.Builder(LLAMA, seed=draw(st.integers(0, 2**16)), alternatives=L.ALTERNATIVES)
    specials = [[L.BOS], [L.PYTHON_TAG], [L.EOT], [L.PAD], [L.RESERVED]]
    pieces = draw(st.lists(st.one_of(text, st.sampled_from(specials)), min_size=1, max_size=4))
    ids: list[int] = []
    for p in pieces:
        ids += p if isinstance(p, list) else b.ids(p)
    ids = ids[:150]
    finish = draw(st.sampled_from(["stop", "length"]))
    if finish == "stop":
        ids.append(draw(st.sampled_from([L.EOT, L.END_OF_TEXT])))
    api = draw(st.sampled_from(["chat", "completion"]))
    extra: dict[str, Any] = {"skip_special_tokens": draw(st.booleans())}
    top = draw(st.one_of(st.none(), st.integers(0, 4)))
    logprobs = None
    if top is not None:
        if api == "chat":
            extra.update(logprobs=True, top_logprobs=top)
            logprobs = b.logprobs(ids, top)
        else:
            extra["logprobs"] = top
            logprobs = b.logprobs(ids, top + 1)
    stream = draw(st.booleans())
    req = L.chat_request(**extra) if api == "chat" else L.completion_request(**extra)
    g = Gen(ids, finish, logprobs=logprobs, cuts=_cuts(draw, len(ids)) if stream else None)
    return Case("hypothesis-llama-plain", "llama-off", api, stream, req, [[g]])


@st.composite
def family_conversations(draw: Any, fam: F.Family) -> Case:
    """GLM-4.7, MiniMax M2 or Qwen3 on one of its servers: optional reasoning (thinking off
    through the template kwargs where the family has the switch), content, 0–2 calls in
    the server's own format (the model writes it under every tool_choice: strict tool
    calling, and GLM's parser never constrains to JSON), under any tool_choice; one of
    the EOS ids or length; streamed in random chunks or whole."""
    tok = FAMILY_TOKENIZERS[fam.prefix]
    b = C.Builder(tok, alternatives=fam.alternatives)
    server = draw(st.sampled_from(fam.servers))
    think = fam.no_think is None or draw(st.booleans())
    reasoning = draw(text) if think else ""
    content = draw(st.one_of(st.just(""), text))
    items = draw(st.lists(tool_call, max_size=2))
    answer = content + (draw(st.sampled_from(["", "\n", "\n\n"])) if content and items else "")
    answer += server.calls(items) if items else ""
    out = fam.think(reasoning, answer) if think else answer
    ids = b.ids(out) if out else b.ids("ok")
    finish = draw(st.sampled_from(["stop", "stop", "length"]))
    stop_reason: int | None = None
    if finish == "stop":
        k = draw(st.integers(0, len(fam.eos) - 1))
        ids.append(fam.eos[k])
        stop_reason = None if k == 0 or draw(st.booleans()) else fam.eos[k]
    extra: dict[str, Any] = {} if think else dict(fam.no_think or {})
    choice = draw(st.sampled_from([None, "auto", "none", "required", "named"]))
    if items or choice is not None or draw(st.booleans()):
        extra["tools"] = C.TOOLS
        if choice == "named":
            extra["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        elif choice is not None:
            extra["tool_choice"] = choice
    stream = draw(st.booleans())
    if stream and draw(st.booleans()):
        extra["stream_options"] = {"include_usage": True}
    req = fam.chat_request(**extra)
    g = Gen(ids, finish, stop_reason, cuts=_cuts(draw, len(ids)) if stream else None)
    usage = "final" if "stream_options" in extra else "none"
    case = Case(f"hypothesis-{fam.prefix}", server.name, "chat", stream, req, [[g]])
    case.engine_usage = usage
    case.extra["shape"] = "native" if items else "prose"
    return F.mark_specials(case, tok)


def _run_examples(
    strategy: Any, peers: Any, registries: Any, prompts: Prompts, tally: Tally, label: str
) -> None:
    failures: list[Outcome] = []
    count = [0]

    @SETTINGS
    @given(strategy)
    def one(case: Case) -> None:
        count[0] += 1
        case.name = f"{label}-{count[0]}"
        outcome = _check(case, peers, registries, prompts, tally)
        if outcome.status == FAILED:
            failures.append(outcome)

    one()
    _report_examples(failures, count[0])


def _report_examples(failures: list[Outcome], count: int) -> None:
    if failures:
        shown = "\n\n".join(f"--- {o.case.name}\n{o.report()}" for o in failures[:8])
        more = (
            f"\n\n(+{len(failures) - 8} more in .parity/failures.txt)" if len(failures) > 8 else ""
        )
        pytest.fail(f"{len(failures)} of {count} examples differ:\n\n{shown}{more}", pytrace=False)


def test_hypothesis_conversations(
    peers: Any, registries: Any, prompts: Prompts, tally: Tally
) -> None:
    _run_examples(conversations(), peers, registries, prompts, tally, "hypothesis-conversation")


def test_hypothesis_plain(peers: Any, registries: Any, prompts: Prompts, tally: Tally) -> None:
    _run_examples(plain_outputs(), peers, registries, prompts, tally, "hypothesis-plain")


def test_hypothesis_llama_conversations(
    peers: Any, registries: Any, prompts: Prompts, tally: Tally
) -> None:
    _run_examples(llama_conversations(), peers, registries, prompts, tally, "hypothesis-llama")


def test_hypothesis_llama_plain(
    peers: Any, registries: Any, prompts: Prompts, tally: Tally
) -> None:
    _run_examples(llama_plain(), peers, registries, prompts, tally, "hypothesis-llama-plain")


# Per family: fewer examples (three families, each a tenth of a second an example). The
# examples of the suites above stay the ones they were (derandomize seeds from the source).
FAMILY_SETTINGS = settings(SETTINGS, max_examples=40)


@pytest.mark.parametrize("fam", F.FAMILIES, ids=[fam.prefix for fam in F.FAMILIES])
def test_hypothesis_families(
    fam: F.Family, peers: Any, registries: Any, prompts: Prompts, tally: Tally
) -> None:
    failures: list[Outcome] = []
    count = [0]

    @FAMILY_SETTINGS
    @given(family_conversations(fam))
    def one(case: Case) -> None:
        count[0] += 1
        case.name = f"hypothesis-{fam.prefix}-{count[0]}"
        outcome = _check(case, peers, registries, prompts, tally)
        if outcome.status == FAILED:
            failures.append(outcome)

    one()
    _report_examples(failures, count[0])
