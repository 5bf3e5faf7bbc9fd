"""Logprobs through `step`: every kind of bad payload fails its request (and only it), as
test_logprobs.py runs the good ones.

Docstrings name the vLLM tests a case mirrors (vLLM's
tests/entrypoints/scale_out/derender/; names without `test_` are its Rust port's,
rust/src/server/src/routes/tests.rs).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.logprobs.logprob_builders import CHAT_LP, entry, errors, lp_chunk
from tests.core.logprobs.logprob_builders import reg as reg  # (the fixture)
from tests.support.helpers import Run, chunk, end
from worker.core.model import Model, Registry

# -- bad payloads ----------------------------------------------------------------------------


def _mutate(path: str, value: Any) -> Any:
    def apply(content: list[Any]) -> list[Any]:
        target: Any = content
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        last = keys[-1]
        if value is _DELETE:
            del target[last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value
        return content

    return apply


_DELETE = object()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_mutate("0.token_id", _DELETE), "has neither `token` and `token_id`"),
        (_mutate("0.token", "token_id:19923"), "has both `token` and `token_id`"),
        (
            _mutate("0.top_logprobs.1.token_id", 10**7),
            "token_id 10000000 is outside the vocabulary",
        ),
        (_mutate("0.token_id", 11), "names token 11 but token_ids[0] is 19923"),
        (
            lambda content: [*content, {"token_id": 11, "logprob": -1.0}],
            "logprobs.content length (2) in choice 0 does not match its token_ids length (1)",
        ),
        (
            _mutate("0.top_logprobs.0.top_logprobs", [{"token_id": 1, "logprob": -1.0}]),
            "has its own top_logprobs",
        ),
    ],
)
def test_bad_shape_b_payloads_fail_the_request(reg: Registry, mutate: Any, message: str) -> None:
    content = mutate([entry(19923, -0.1, [(19923, -0.1), (11, -2.0)])])
    _assert_fails_before_decoding(reg, content, message)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("token_id:", "is not a `token_id:N` placeholder"),
        ("token_id: 7", "is not a `token_id:N` placeholder"),
        ("token_id:+7", "is not a `token_id:N` placeholder"),
        ("token_id:٧", "is not a `token_id:N` placeholder"),
        ("token_id:129280", "token id 129280 is outside the vocabulary [0, 129280)"),
    ],
)
def test_bad_placeholders_fail_the_request(reg: Registry, token: str, message: str) -> None:
    content = [entry(19923, -0.1, [(19923, -0.1)], "A")]
    content[0]["top_logprobs"][0]["token"] = token
    _assert_fails_before_decoding(reg, content, message)


def test_bounds_on_logprobs(reg: Registry) -> None:
    """test_derender_chat_oversized_logprobs_rejected, _top_logprobs_rejected: content over
    max_model_len, candidates over max_logprobs."""
    many = [entry(19923, -0.1, [(19923, -0.1)] * 6)]
    _assert_fails_before_decoding(
        reg, many, "top_logprobs count (6) in choice 0 exceeds max_logprobs (5)"
    )
    long = [entry(19923, -0.1)] * 65
    _assert_fails_before_decoding(
        reg,
        long,
        "logprobs.content length (65) in choice 0 exceeds max_model_len (64)",
        ids=[19923] * 64,
    )


def test_a_bad_payload_fails_even_when_logprobs_were_not_asked(reg: Registry) -> None:
    content = [{"logprob": -0.1}]
    _assert_fails_before_decoding(reg, content, "has neither", request={})


def _assert_fails_before_decoding(
    reg: Registry,
    content: list[Any],
    message: str,
    ids: list[int] | None = None,
    request: dict[str, Any] | None = None,
) -> None:
    run = Run(reg)
    run.feed(chunk("r", 0, [], chat_request=CHAT_LP if request is None else request))
    with pytest.MonkeyPatch.context() as mp:

        def boom(self: Model, *args: Any) -> None:
            raise AssertionError("tokenizer used before the logprobs were checked")

        mp.setattr(Model, "detokenizer", boom)
        mp.setattr(Model, "resolver", boom)
        run.feed(lp_chunk("r", 1, ids or [19923], content))
    (err,) = errors(run)
    assert err["code"] == "invalid_request_error"
    assert err["param"] == "logprobs"
    assert message in err["message"]
    run.feed(end("r", 2))
    assert run.values()[-1] == "[DONE]"


@pytest.mark.parametrize(
    "bad",
    [
        [{"token_id": 19923}],  # no logprob
        [{"token_id": 19923, "logprob": "high"}],
        [{"token_id": 19923, "logprob": -0.1, "top_logprobs": {"19923": -0.1}}],
        {"token_id": 19923, "logprob": -0.1},  # not a list
    ],
)
def test_malformed_logprobs_are_schema_errors(reg: Registry, bad: Any) -> None:
    """Wrong types (a missing logprob, a dict of candidates) do not match the record
    schema: dead-lettered, and the request gets an error."""
    run = Run(reg)
    run.feed(lp_chunk("r", 0, [19923], bad))
    assert len(run.dead) == 1
    (err,) = errors(run)
    assert err["code"] == "invalid_record"
    assert "logprobs" in err["message"]
