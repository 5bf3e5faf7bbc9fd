"""`serve` with `n > 1`: each choice opens once (one role, on its first answer), whichever
protocol the client follows — one `stream_state` per choice index, each starting at null
(how vLLM's clients drive its derender), or one state shared by every choice — for any
interleaving of the choices and any chunking, with and without parsers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.serve.bodies import CHAT_REQUEST, PLAIN, REASONED, chat_body, chunk_body, split
from tests.support.examples import examples
from worker.core.model import Registry
from worker.serve.driver import Driver

CASES: list[tuple[str, list[int]]] = [("plain", PLAIN), ("deepseek-v4", REASONED)]


class Drivers:
    """A fresh Driver per example (short repr: hypothesis prints its arguments)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def __call__(self) -> Driver:
        return Driver(self.registry)

    def __repr__(self) -> str:
        return "Drivers()"


@pytest.fixture(scope="module")
def drivers(serve_registry: Registry) -> Drivers:
    return Drivers(serve_registry)


def _calls(
    n: int, sizes: list[int], order: list[int], out: list[int]
) -> list[tuple[int, list[int], str | None]]:
    """(choice index, ids, finish) per call: each choice's pieces in order, the choices
    interleaved as `order` picks them (an index past its pieces is skipped)."""
    pieces = {i: split(out, sizes[i:] + sizes[:i]) for i in range(n)}
    taken = dict.fromkeys(range(n), 0)
    calls = []
    for pick in order + [i for i in range(n) for _ in range(len(out))]:
        i = pick % n
        if taken[i] < len(pieces[i]):
            k = taken[i]
            taken[i] += 1
            calls.append((i, pieces[i][k], "stop" if k == len(pieces[i]) - 1 else None))
    return calls


def _drive(
    driver: Driver, model: str, n: int, calls: list[tuple[int, list[int], str | None]], shared: bool
) -> list[dict[str, Any]]:
    request = dict(CHAT_REQUEST, model=model, n=n)
    states: dict[int, Any] = {}
    answers = []
    for index, ids, finish in calls:
        key = 0 if shared else index
        body = chunk_body(
            ids,
            states.get(key),
            rid="n-choices",
            model=model,
            index=index,
            finish=finish,
            chat_request=request,
        )
        status, raw = driver.chat(json.dumps(body).encode())
        assert status == 200, raw
        answer = json.loads(raw)
        states[key] = answer["stream_state"]
        answers.append(answer["chunk"])
    return answers


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(range(len(CASES))),
    n=st.integers(min_value=2, max_value=3),
    shared=st.booleans(),
    sizes=st.lists(st.integers(min_value=1, max_value=5), min_size=3, max_size=12),
    order=st.lists(st.integers(min_value=0, max_value=2), max_size=30),
)
def test_each_choice_opens_once(
    drivers: Drivers,
    case: int,
    n: int,
    shared: bool,
    sizes: list[int],
    order: list[int],
) -> None:
    model, out = CASES[case]
    driver = drivers()
    whole = json.loads(
        driver.chat(json.dumps(chat_body(out, model=model, chat_request=dict(CHAT_REQUEST))))[1]
    )["choices"][0]["message"]
    calls = _calls(n, sizes, order, out)
    answers = _drive(driver, model, n, calls, shared)
    roles: dict[int, list[int]] = {i: [] for i in range(n)}
    texts = {i: {"content": "", "reasoning": ""} for i in range(n)}
    seen: list[int] = []
    for k, chunk in enumerate(answers):
        for c in chunk["choices"]:
            i = c["index"]
            # a choice appears first in the answer that opens it, and only there
            assert ("role" in c["delta"]) == (i not in seen), (k, c)
            if i not in seen:
                seen.append(i)
            if "role" in c["delta"]:
                assert c["delta"]["role"] == "assistant"
                roles[i].append(k)
            for field in texts[i]:
                texts[i][field] += c["delta"].get(field) or ""
    assert all(len(r) == 1 for r in roles.values()), roles
    # each answer holds its chunk's choice only: the same answers whichever the protocol
    assert [[c["index"] for c in a["choices"]] for a in answers] == [[i] for i, _, _ in calls]
    for i in range(n):
        assert texts[i]["content"] == (whole.get("content") or "")
        assert texts[i]["reasoning"] == (whole.get("reasoning") or "")


def test_one_state_per_choice_opens_each_choice_on_its_first_answer(
    serve_registry: Registry,
) -> None:
    """vLLM's clients carry one state per choice, each starting at null: choice 1's
    first call must not open choice 0 again (nor choice 0's first open choice 1)."""
    driver = Driver(serve_registry)
    calls = [(0, PLAIN[:2], None), (1, PLAIN[:2], None), (0, PLAIN[2:], "stop")]
    calls.append((1, PLAIN[2:], "stop"))
    answers = _drive(driver, "plain", 2, calls, shared=False)
    opened = [[(c["index"], c["delta"].get("role")) for c in a["choices"]] for a in answers]
    assert opened == [[(0, "assistant")], [(1, "assistant")], [(0, None)], [(1, None)]]
