"""The loop against vLLM's own server on the same engine.

Each case is one client body, at temperature 0 (greedy: the same tokens every time on this
engine). Our answer: render → generate → records on the input topic → a real
`derender-worker run` → its outputs (tests/e2e/loop.py). The oracle: the coupled
`/v1/chat/completions` or `/v1/completions` of the same vLLM process. Both are read by the
official `openai` SDK (tests/e2e/oracle.py), streamed and whole, and must agree on content,
reasoning, tool calls, finish_reason, stop_reason, usage and logprobs — but for the
documented differences (`DIFFERENCES`, the table of docs/reference/parity.md), which must
show exactly where they are said to.

A random-weight model says something structured only when made to: the guidance backend's
Lark grammars name the marker tokens by id (`<[128822]>` is `</think>`), so reasoning and
DeepSeek tool calls come out as the real marker tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest

from tests.e2e.differences import TALLY, expected
from tests.e2e.engine import SERVED_MODEL
from tests.e2e.loop import Loop, Options
from tests.e2e.oracle import compare, read_error

# The first test's time includes starting the engine (bounded by engine.START_TIMEOUT_S
# and WARM_UP_TIMEOUT_S), Kafka and the worker; each answer is bounded by loop.py.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(540)]

MESSAGES = [{"role": "user", "content": "Hi"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
# DeepSeek's call markers by id: calls begin, call begin, the name, sep, the JSON
# arguments, call end, calls end (the format of vLLM's deepseek_v31 tool parser).
TOOL_GRAMMAR = (
    'start: <[128806]> <[128808]> "get_weather" <[128814]> '
    '"{\\"city\\":\\"" /[a-z]{1,6}/ "\\"}" <[128809]> <[128807]>'
)
# After the prompt's `<think>`: reasoning, `</think>`, the answer.
REASONING_GRAMMAR = 'start: "Let me think." <[128822]> "The answer is 42."'
THINK_THEN_CALL_GRAMMAR = TOOL_GRAMMAR.replace("start: ", 'start: "Need the weather." <[128822]> ')
SENTENCE_GRAMMAR = 'start: "one two three four five six"'


def grammar(text: str) -> dict[str, Any]:
    return {"structured_outputs": {"grammar": text}}


@dataclass
class Case:
    name: str
    api: str  # "chat" or "completion"
    params: dict[str, Any]
    options: Options = field(default_factory=Options)

    def body(self) -> dict[str, Any]:
        base: dict[str, Any] = {"model": SERVED_MODEL, "temperature": 0}
        if self.api == "chat":
            base["messages"] = MESSAGES
        return {**base, **self.params}


CASES = [
    Case("plain text, finished by EOS", "chat", {"max_tokens": 40, **grammar(SENTENCE_GRAMMAR)}),
    Case("a max_tokens cut", "chat", {"max_tokens": 12}),
    # The render leaves out a max_tokens equal to its default; the loop puts it back.
    Case("max_tokens of 16", "chat", {"max_tokens": 16}),
    Case(
        "reasoning",
        "chat",
        {
            "max_tokens": 40,
            "chat_template_kwargs": {"enable_thinking": True},
            **grammar(REASONING_GRAMMAR),
        },
    ),
    Case(
        "reasoning hidden (include_reasoning: false)",
        "chat",
        {
            "max_tokens": 40,
            "include_reasoning": False,
            "chat_template_kwargs": {"enable_thinking": True},
            **grammar(REASONING_GRAMMAR),
        },
    ),
    Case(
        "reasoning, then a tool call",
        "chat",
        {
            "max_tokens": 60,
            "chat_template_kwargs": {"enable_thinking": True},
            "tools": [WEATHER_TOOL],
            "tool_choice": "auto",
            **grammar(THINK_THEN_CALL_GRAMMAR),
        },
    ),
    Case(
        "a tool call",
        "chat",
        {"max_tokens": 40, "tools": [WEATHER_TOOL], "tool_choice": "auto", **grammar(TOOL_GRAMMAR)},
    ),
    Case(
        "logprobs with top_logprobs", "chat", {"max_tokens": 8, "logprobs": True, "top_logprobs": 3}
    ),
    Case(
        "a stop string, applied by the engine",
        "chat",
        {"max_tokens": 40, "stop": ["three"], **grammar(SENTENCE_GRAMMAR)},
    ),
    Case(
        "a stop string, applied by the worker alone",
        "chat",
        {"max_tokens": 40, "stop": ["three"], **grammar(SENTENCE_GRAMMAR)},
        Options(engine_stop=False),
    ),
    # Greedy decoding refuses n > 1; a seeded sample is as repeatable.
    Case("n = 2, seeded sampling", "chat", {"n": 2, "temperature": 1, "seed": 7, "max_tokens": 6}),
    Case("completion, default max_tokens", "completion", {"prompt": "Once upon a time"}),
    Case(
        "completion, n = 2",
        "completion",
        {"prompt": "Once", "n": 2, "temperature": 1, "seed": 7, "max_tokens": 6},
    ),
    Case(
        "completion with echo and logprobs",
        "completion",
        {"prompt": "Hello world", "max_tokens": 6, "echo": True, "logprobs": 2},
    ),
    Case(
        "completion, a stop string applied by the worker alone",
        "completion",
        {"prompt": "Count:", "max_tokens": 40, "stop": ["three"], **grammar(SENTENCE_GRAMMAR)},
        Options(engine_stop=False),
    ),
]


@pytest.fixture(scope="module")
def oracle(engine_url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="e2e", base_url=f"{engine_url}/v1", max_retries=0, timeout=60)


def check(
    case: Case,
    stream: bool,
    ours: openai.OpenAI,
    oracle: openai.OpenAI,
    generated: Callable[[], list[int]] | None = None,
) -> None:
    """One case, read through `ours` (the loop's client, or a gateway's
    `openai.OpenAI(base_url=…)`) and the oracle: equal, but for the documented
    differences, each as it is said to look. `generated`: the token ids the engine
    generated for our answer, where known."""
    body = case.body()
    mine, theirs, diff = compare(case.api, body, stream, ours, oracle)
    assert theirs and all(v.finish_reason is not None for v in theirs), theirs
    documented = expected(case.api, body, case.options, stream)
    undocumented = {k: v for k, v in diff.items() if k not in {d.field for d in documented}}
    assert not undocumented, f"differences no table lists: {undocumented}\nours: {mine}"
    TALLY["comparisons"] += 1
    TALLY["identical" if not diff else "with documented differences"] += 1
    ids = generated() if generated else None
    for d in documented:
        TALLY[d.id] += 1
        assert d.field in diff, f"{d.id}: no longer differs: {[getattr(v, d.field) for v in mine]}"
        pairs = [(o, t) for o, t in zip(*diff[d.field], strict=True) if o != t]
        assert all(d.looks(o, t, ids) for o, t in pairs), f"{d.id} looks otherwise: {pairs}"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_loop_answers_as_vllms_coupled_server(
    case: Case, stream: bool, loop: Loop, oracle: openai.OpenAI
) -> None:
    loop.options = case.options
    try:
        check(case, stream, loop.client(), oracle, lambda: loop.answers[-1].generated_ids())
    finally:
        loop.options = Options()
    answer = loop.answers[-1]
    # Every output came back on the partition its request named.
    named = answer.records[0]["reply_partition"]
    assert {out.partition for out in answer.outputs} == {named}, answer.outputs


# Bodies the engine refuses: at render (the first two), or, for a stream, in the generate
# stream's first event (top_logprobs over the engine's max_logprobs).
ERRORS = {
    "max_tokens over the context": {"max_tokens": 5000},
    "n > 1 with greedy sampling": {"n": 2, "max_tokens": 4},
    "top_logprobs over max_logprobs": {"max_tokens": 4, "logprobs": True, "top_logprobs": 30},
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("params", ERRORS.values(), ids=list(ERRORS))
def test_the_engines_refusal_reaches_the_client_unchanged(
    params: dict[str, Any], stream: bool, loop: Loop, oracle: openai.OpenAI
) -> None:
    body = {"model": SERVED_MODEL, "temperature": 0, "messages": MESSAGES, **params}
    theirs = read_error("chat", oracle, body, stream)
    ours = read_error("chat", loop.client(), body, stream)
    assert theirs[1]["code"] == 400, theirs
    assert ours == theirs
    assert not loop.answers[-1].records  # nothing reached the input topic
