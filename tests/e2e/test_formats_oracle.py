"""The gateway's `POST /v1/responses` and `POST /v1/messages` against vLLM's own
`/v1/responses` and `/v1/messages` on the same engine, at temperature 0.

Ours: the gateway renders through the engine's `/v1/responses/render` or
`/v1/messages/render`, generates, and the worker derenders into the API's events. The
oracle: the coupled servers, which build both APIs from their chat stream. Each answer is
read by the official SDK (`openai` for Responses, `anthropic` for Messages; tests/e2e/
formats_oracle.py), streamed and whole, and must agree on output text, reasoning,
function calls, stop reason and usage — but for the documented differences
(tests/e2e/differences.py, the table of docs/reference/parity.md).

Messages takes no `structured_outputs` on this engine, so its cases are what the random
model says by itself: text, a `max_tokens` cut, thinking (the template opens `<think>`
and the model never closes it), a stop sequence taken from its own text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest

from tests.e2e.differences import TALLY, expected
from tests.e2e.engine import SERVED_MODEL
from tests.e2e.formats_oracle import FormatView, compare, read_messages, read_responses
from tests.e2e.gateways import Gateway
from tests.e2e.loop import Options
from tests.e2e.test_engine_oracle import (
    REASONING_GRAMMAR,
    SENTENCE_GRAMMAR,
    THINK_THEN_CALL_GRAMMAR,
    TOOL_GRAMMAR,
    grammar,
)
from tests.e2e.test_gateway_oracle import next_gateway

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(540)]

THINKING = {"chat_template_kwargs": {"enable_thinking": True}}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ANTHROPIC_WEATHER = {"name": "get_weather", "input_schema": WEATHER["parameters"]}


@dataclass
class FormatCase:
    name: str
    api: str  # "responses" or "messages"
    params: dict[str, Any]
    # What the oracle's answer shows (so a case tests what its name says).
    shows: Callable[[FormatView], bool] = lambda v: v.text is not None
    options: Options = field(default_factory=Options)

    def body(self) -> dict[str, Any]:
        base: dict[str, Any] = {"model": SERVED_MODEL, "temperature": 0}
        if self.api == "responses":
            base["input"] = "Hi"
        else:
            base["messages"] = [{"role": "user", "content": "Hi"}]
            base["max_tokens"] = 40
        return {**base, **self.params}


def _calls(view: FormatView) -> bool:
    return [name for name, _ in view.calls] == ["get_weather"]


CASES = [
    FormatCase(
        "responses: text",
        "responses",
        {"max_output_tokens": 40, **grammar(SENTENCE_GRAMMAR)},
        lambda v: v.stop == ("completed", None) and v.text == "one two three four five six",
    ),
    FormatCase(
        "responses: a max_output_tokens cut",
        "responses",
        {"max_output_tokens": 12},
        lambda v: v.stop == ("incomplete", "max_output_tokens"),
    ),
    FormatCase(
        "responses: reasoning",
        "responses",
        {"max_output_tokens": 40, **THINKING, **grammar(REASONING_GRAMMAR)},
        lambda v: v.reasoning is not None and v.text is not None,
    ),
    FormatCase(
        "responses: a function call",
        "responses",
        {
            "max_output_tokens": 40,
            "tools": [WEATHER],
            "tool_choice": "auto",
            **grammar(TOOL_GRAMMAR),
        },
        _calls,
    ),
    FormatCase(
        "responses: reasoning, then a function call",
        "responses",
        {
            "max_output_tokens": 60,
            "tools": [WEATHER],
            "tool_choice": "auto",
            **THINKING,
            **grammar(THINK_THEN_CALL_GRAMMAR),
        },
        lambda v: _calls(v) and v.reasoning is not None,
    ),
    FormatCase("messages: text", "messages", {"max_tokens": 30}),
    FormatCase(
        "messages: a max_tokens cut",
        "messages",
        {"max_tokens": 7},
        lambda v: v.stop == ("max_tokens", None) and v.usage is not None,
    ),
    FormatCase(
        "messages: thinking",
        "messages",
        {"max_tokens": 20, **THINKING},
        lambda v: v.reasoning is not None and v.text is None,
    ),
    FormatCase("messages: with a tool offered", "messages", {"tools": [ANTHROPIC_WEATHER]}),
]


@pytest.fixture(scope="module")
def oracles(engine_url: str) -> Iterator[dict[str, Any]]:
    o = openai.OpenAI(api_key="e2e", base_url=f"{engine_url}/v1", max_retries=0, timeout=60)
    a = anthropic.Anthropic(api_key="e2e", base_url=engine_url, max_retries=0, timeout=60)
    yield {"responses": o, "messages": a}
    o.close()
    a.close()


def ours(api: str, g: Gateway) -> Any:
    if api == "responses":
        return g.client()
    return anthropic.Anthropic(api_key="e2e", base_url=g.url, max_retries=0, timeout=60)


def check(case: FormatCase, body: dict[str, Any], stream: bool, client: Any, oracle: Any) -> None:
    mine, theirs, diff = compare(case.api, body, stream, client, oracle)
    assert case.shows(theirs), f"the case shows otherwise: {theirs}"
    documented = expected(case.api, body, case.options, stream)
    undocumented = {k: v for k, v in diff.items() if k not in {d.field for d in documented}}
    assert not undocumented, f"differences no table lists: {undocumented}\nours: {mine}"
    TALLY["comparisons"] += 1
    TALLY["identical" if not diff else "with documented differences"] += 1
    for d in documented:
        TALLY[d.id] += 1
        assert d.field in diff, f"{d.id}: no longer differs: {getattr(mine, d.field)}"
        assert d.looks(*diff[d.field], None), f"{d.id} looks otherwise: {diff[d.field]}"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_gateway_answers_as_vllms_own_server(
    case: FormatCase, stream: bool, gateways: dict[str, Gateway], oracles: dict[str, Any]
) -> None:
    g = next_gateway(gateways)
    client = ours(case.api, g)
    try:
        check(case, case.body(), stream, client, oracles[case.api])
    finally:
        client.close()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_stop_sequence_from_the_models_own_text(
    stream: bool, gateways: dict[str, Gateway], oracles: dict[str, Any]
) -> None:
    """Messages' `stop_sequences`: a word the model says anyway (read from its answer
    without one) ends the answer there, `stop_reason: "stop_sequence"`."""
    case = FormatCase("messages: a stop sequence", "messages", {"max_tokens": 30})
    said = read_messages(oracles["messages"], case.body(), False).text or ""
    words = [w for w in said.split() if len(w) > 3]
    if len(words) < 3:
        pytest.skip(f"the model's text has no word to stop at: {said!r}")
    word = words[len(words) // 2]
    body = dict(case.body(), stop_sequences=[word])
    case.shows = lambda v: v.stop == ("stop_sequence", word)
    g = next_gateway(gateways)
    client = ours("messages", g)
    try:
        check(case, body, stream, client, oracles["messages"])
    finally:
        client.close()


# Bodies the engine refuses at render: the client gets the API's error, with vLLM's status
# and message.
ERRORS = {
    "responses": {"model": SERVED_MODEL, "input": "Hi", "max_output_tokens": 5000},
    "messages": {
        "model": SERVED_MODEL,
        "max_tokens": 5000,
        "messages": [{"role": "user", "content": "Hi"}],
    },
}


def _refusal(api: str, client: Any, body: dict[str, Any], stream: bool) -> tuple[int, Any]:
    errors = (openai.APIStatusError, anthropic.APIStatusError)
    try:
        view = (read_responses if api == "responses" else read_messages)(client, body, stream)
    except errors as e:
        return e.status_code, e.body
    raise AssertionError(f"no error, but an answer: {view}")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("api", list(ERRORS))
def test_the_engines_refusal_reaches_the_client_in_the_apis_shape(
    api: str, stream: bool, gateways: dict[str, Gateway], oracles: dict[str, Any]
) -> None:
    body = ERRORS[api]
    g = next_gateway(gateways)
    client = ours(api, g)
    try:
        theirs = _refusal(api, oracles[api], body, stream)
        mine = _refusal(api, client, body, stream)
    finally:
        client.close()
    assert theirs[0] == mine[0] == 400, (theirs, mine)
    if api == "responses":
        assert mine[1] == theirs[1]
        return
    # Anthropic's shape on both sides; the error's `type`: see `messages-error-type`
    assert mine[1]["error"]["message"] == theirs[1]["error"]["message"]
    (d,) = expected("messages-error", body, Options(), stream)
    TALLY[d.id] += 1
    assert d.looks(mine[1]["error"]["type"], theirs[1]["error"]["type"], None)
