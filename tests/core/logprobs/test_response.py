"""`type = "response"` records: whole generate output → one `chat.completion` /
`text_completion`: choices, usage, pass-through, stops and logprobs, bad input.

Docstrings name the vLLM tests a case mirrors (vLLM's
tests/entrypoints/scale_out/derender/; names without `test_` are its Rust port's,
rust/src/server/src/routes/tests.rs).
"""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.logprobs.logprob_builders import byte_tokenizer, entries, entry, errors, ids_of
from tests.support.helpers import Run, registry
from worker.core.model import Registry


@pytest.fixture(scope="module")
def breg() -> Registry:
    return registry(byte_tokenizer(), name="render-model", max_model_len=128, max_logprobs=20)


@pytest.fixture
def reg(deepseek: Tokenizer) -> Registry:
    return registry(deepseek, name="deepseek-v4", max_model_len=64, max_logprobs=5)


def b(text: str) -> list[int]:
    return list(text.encode())


def gen(ids: list[int] | None, index: int = 0, **extra: Any) -> dict[str, Any]:
    return {"index": index, "token_ids": ids, **extra}


def respond(
    reg: Registry, api: str = "chat", choices: list[Any] | None = None, **record: Any
) -> Run:
    rec: dict[str, Any] = {"request_id": "resp-1", "seq": 0, "type": "response", "api": api}
    if choices is not None:
        rec["generate_response"] = {"request_id": "resp-1", "choices": choices}
    rec.update(record)
    run = Run(reg)
    run.feed(rec)
    return run


def response(run: Run) -> dict[str, Any]:
    assert errors(run) == []
    (value,) = run.values("response")
    return value  # type: ignore[no-any-return]


# -- shape, choices ----------------------------------------------------------------------


def test_chat_completion_shape(breg: Registry) -> None:
    run = respond(breg, choices=[gen(b("done"))], created=1767225600)
    assert run.values() == [
        {
            "id": "resp-1",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "render-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "done"},
                    "logprobs": None,
                    "finish_reason": "stop",
                    "stop_reason": None,
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 4, "total_tokens": 4},
            "prompt_logprobs": None,
            "kv_transfer_params": None,
        }
    ]
    assert run.outputs[0].kind == "response"


def test_chat_keeps_the_engine_index_completion_reindexes(breg: Registry) -> None:
    """vLLM's online_derenderer.py: chat keeps `index`; completion flattens responses in
    order, re-indexed."""
    chat = response(respond(breg, choices=[gen(b("b"), 1), gen(b("a"), 0)]))
    assert [(c["index"], c["message"]["content"]) for c in chat["choices"]] == [(1, "b"), (0, "a")]
    two = [
        {"request_id": "c-0", "choices": [gen(b("x"), 3), gen(b("y"), 0)]},
        {"request_id": "c-1", "choices": [gen(b("z"), 7)]},
    ]
    cmpl = response(respond(breg, "completion", generate_responses=two))
    assert [(c["index"], c["text"]) for c in cmpl["choices"]] == [(0, "x"), (1, "y"), (2, "z")]


def test_finish_reason_forwarded(breg: Registry) -> None:
    """test_finish_reason_forwarded: the engine's reason, verbatim."""
    resp = response(respond(breg, "completion", [gen(b("done"), finish_reason="length")]))
    assert resp["choices"][0]["finish_reason"] == "length"


# -- usage ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("prompt_tokens", "expected"), [(10, 10), (None, 0)])
def test_chat_usage(breg: Registry, prompt_tokens: int | None, expected: int) -> None:
    """test_derender_chat_usage, test_derender_chat_usage_default."""
    resp = response(respond(breg, choices=[gen(b("abc"))], prompt_tokens=prompt_tokens))
    assert resp["usage"] == {
        "prompt_tokens": expected,
        "completion_tokens": 3,
        "total_tokens": expected + 3,
    }


def test_completion_usage_aggregates_once_per_response(breg: Registry) -> None:
    """test_derender_completion_usage_aggregation: prompts of 5 and 10 tokens, outputs "abc"
    and "defg" → 15 / 7 / 22."""
    two = [
        {"choices": [gen(b("abc"))], "prompt_token_ids": [1] * 5},
        {"choices": [gen(b("defg"))], "usage": {"prompt_tokens": 10, "completion_tokens": 99}},
    ]
    resp = response(respond(breg, "completion", generate_responses=two))
    assert resp["usage"] == {"prompt_tokens": 15, "completion_tokens": 7, "total_tokens": 22}


def test_usage_overflow_is_an_error(breg: Registry) -> None:
    """derender_chat_usage_overflow_rejected."""
    run = respond(breg, choices=[gen(b("a"))], prompt_tokens=2**64 - 1)
    (err,) = errors(run)
    assert "overflows the token counter" in err["message"]


# -- pass-through --------------------------------------------------------------------------


def test_chat_pass_through(breg: Registry) -> None:
    """test_derender_chat_prompt_logprobs_passthrough, _kv_transfer_params_passthrough;
    metrics below."""
    metrics = {"time_to_first_token_ms": 1.5, "generation_time_ms": None}
    run = Run(breg)
    run.feed(
        {
            "request_id": "r",
            "seq": 0,
            "type": "response",
            "generate_response": {
                "choices": [gen(b("ok"))],
                "prompt_logprobs": [None, None],
                "kv_transfer_params": {"key": "value"},
                "metrics": metrics,
            },
        }
    )
    resp = response(run)
    assert resp["prompt_logprobs"] == [None, None]
    assert resp["kv_transfer_params"] == {"key": "value"}
    assert resp["metrics"] == {**metrics, **NULL_TIMINGS, "time_to_first_token_ms": 1.5}


NULL_TIMINGS = dict.fromkeys(
    [
        "time_to_first_token_ms",
        "generation_time_ms",
        "queue_time_ms",
        "mean_itl_ms",
        "tokens_per_second",
        "speculative_decoding",
    ]
)
SPEC = {
    "mean_acceptance_length": 2.0,
    "draft_acceptance_rate": 0.5,
    "acceptance_histogram": [0, 1],
    "num_spec_steps": 1,
    "num_accepted_draft_tokens": 1,
    "num_draft_tokens": 2,
    "num_spec_tokens": 1,
}


@pytest.mark.parametrize("api", ["chat", "completion"])
def test_metrics_come_back_in_vllm_full_shape(breg: Registry, api: str) -> None:
    """test_derender_chat_metrics_passthrough: vLLM 0.33 reads `metrics`
    into its PerRequestMetrics and writes the model back: every timing (null when not
    sent), `speculative_decoding` with `per_step_accepted` / `per_step_drafted`, values
    converted as pydantic's lax mode does, unknown keys kept after the model's own."""
    metrics = {
        "engine_note": "x",
        "queue_time_ms": 3,
        "speculative_decoding": {**SPEC, "num_spec_steps": 1.0, "extra": [1]},
    }
    key = "generate_response" if api == "chat" else "generate_responses"
    body = {"choices": [gen(b("ok"))], "metrics": metrics}
    resp = response(respond(breg, api, **{key: body if api == "chat" else [body]}))
    assert resp["metrics"] == {
        **NULL_TIMINGS,
        "queue_time_ms": 3.0,
        "speculative_decoding": {
            **SPEC,
            "per_step_accepted": None,
            "per_step_drafted": None,
            "extra": [1],
        },
        "engine_note": "x",
    }
    assert list(resp["metrics"])[:6] == list(NULL_TIMINGS)  # vLLM's order, extras after
    assert isinstance(resp["metrics"]["queue_time_ms"], float)
    assert isinstance(resp["metrics"]["speculative_decoding"]["num_spec_steps"], int)


@pytest.mark.parametrize(
    ("metrics", "field"),
    [
        ({"speculative_decoding": {"num_spec_steps": 1}}, "mean_acceptance_length"),
        ({"speculative_decoding": {**SPEC, "num_draft_tokens": 2.5}}, "num_draft_tokens"),
        ({"mean_itl_ms": "fast"}, "mean_itl_ms"),
        ({"speculative_decoding": [1]}, "speculative_decoding"),
    ],
)
def test_metrics_vllm_cannot_read_are_refused(
    breg: Registry, metrics: dict[str, Any], field: str
) -> None:
    """What vLLM's PerRequestMetrics refuses (a required field missing, a value of
    another type) fails the request, naming the field (vLLM: 400)."""
    run = respond(breg, generate_response={"choices": [gen(b("ok"))], "metrics": metrics})
    (err,) = errors(run)
    assert err["code"] == "invalid_request_error"
    assert err["param"] == "generate_response.metrics"
    assert f".{field}: not of vLLM's PerRequestMetrics shape" in err["message"]


def test_completion_metrics_of_several_prompts_are_left_out(breg: Registry) -> None:
    """vLLM's rule: metrics describe one prompt, and several prompts' cannot be merged
    (even equal ones)."""
    body = {"choices": [gen(b("x"))], "metrics": {"queue_time_ms": 1.0}}
    resp = response(respond(breg, "completion", generate_responses=[body, body]))
    assert "metrics" not in resp


@pytest.mark.parametrize(
    ("kv", "expected"),
    [
        ([{"node": "abc"}], {"node": "abc"}),
        ([{"node": "abc"}, {"node": "abc"}], {"node": "abc"}),
        ([{"node": "a"}, {"node": "b"}], None),
        ([{"node": "a"}, None], None),
    ],
)
def test_completion_kv_transfer_params_kept_only_when_all_agree(
    breg: Registry, kv: list[Any], expected: Any
) -> None:
    """derender_completion_kv_transfer_params_disagreement_nulled, and passthrough."""
    responses = [{"choices": [gen(b("x"))], "kv_transfer_params": v} for v in kv]
    resp = response(respond(breg, "completion", generate_responses=responses))
    assert resp["kv_transfer_params"] == expected
    assert "metrics" not in resp


# -- text, stops, logprobs -----------------------------------------------------------------


def test_stop_strings_and_tokens_apply_as_in_streaming(words: Tokenizer) -> None:
    """vLLM's test_derender_stop.py table on the whole path."""
    cases = [
        ((), {"stop": ["three"]}, "one two", "three"),
        ((), {"stop_token_ids": [3]}, "one two", 3),
        ((3,), {}, "one two", None),  # the primary EOS: stop_reason stays null
        ((3,), {"stop": ["two"]}, "one", "two"),
    ]
    for eos, req, text, reason in cases:
        run = respond(
            registry(words, eos_token_ids=eos), choices=[gen([1, 2, 3])], chat_request=req
        )
        (choice,) = response(run)["choices"]
        assert (choice["message"]["content"].strip(), choice["stop_reason"]) == (text, reason)
        assert choice["finish_reason"] == "stop"


def test_completion_logprobs_as_in_the_reference_example(
    reg: Registry, deepseek: Tokenizer
) -> None:
    """A completion of "Hello world" with logprobs 1 → offsets [0, 5], one candidate kept
    besides."""
    hello, world = ids_of(deepseek, "Hello world")
    hi = ids_of(deepseek, "Hi")[0]
    content = [
        entry(hello, -0.31, [(hello, -0.31), (hi, -1.9)], "A"),
        entry(world, -0.05, [(world, -0.05)], "A"),
    ]
    choices = [gen([hello, world], finish_reason="length", logprobs={"content": content})]
    req = {"prompt": "Say hi", "max_tokens": 2, "logprobs": 1}
    resp = response(respond(reg, "completion", choices, completion_request=req))
    assert resp["choices"][0]["text"] == "Hello world"
    assert resp["choices"][0]["logprobs"] == {
        "text_offset": [0, 5],
        "token_logprobs": [-0.31, -0.05],
        "tokens": ["Hello", " world"],
        "top_logprobs": [{"Hello": -0.31, "Hi": -1.9}, {" world": -0.05}],
    }


def test_chat_logprobs_stop_at_the_stop_string(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "Keep this. END and not this")
    choices = [gen(ids, logprobs={"content": entries(ids)})]
    req = {"logprobs": True, "stop": ["END"]}
    (choice,) = response(respond(reg, choices=choices, chat_request=req))["choices"]
    assert choice["message"]["content"] == "Keep this. "
    tokens = "".join(e["token"] for e in choice["logprobs"]["content"])
    assert tokens == "Keep this. END"


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"generate_response": {"choices": [gen([])]}}, "choice 0 has empty or null token_ids"),
        ({"generate_response": {"choices": [gen(None)]}}, "choice 0 has empty or null token_ids"),
        ({"generate_response": {"choices": [gen([-1, 42])]}}, "token id -1 outside the vocabulary"),
        ({"generate_response": {"choices": [gen([42] * 129)]}}, "exceeds max_model_len (128)"),
        (
            {
                "generate_response": {
                    "choices": [gen([42], logprobs={"content": [entry(42, -1)] * 129})]
                }
            },
            "logprobs.content length (129) in choice 0 exceeds max_model_len (128)",
        ),
        (
            {
                "generate_response": {
                    "choices": [gen([42], logprobs={"content": [entry(42, -1, [(42, -1)] * 21)]})]
                }
            },
            "top_logprobs count (21) in choice 0 exceeds max_logprobs (20)",
        ),
        (
            {"generate_response": {"choices": [gen([42])], "prompt_token_ids": [1] * 129}},
            "prompt_token_ids length (129) exceeds max_model_len",
        ),
        (
            {"generate_response": {"choices": [gen([42])], "prompt_logprobs": [None] * 129}},
            "prompt_logprobs length (129) in response 'None' exceeds max_model_len (128)",
        ),
        ({}, "needs `generate_response` or `generate_responses` (it has neither)"),
        (
            {"generate_response": {"choices": []}, "generate_responses": []},
            "(it has both)",
        ),
        ({"api": "completion", "generate_responses": []}, "generate_responses must not be empty"),
        (
            {"generate_responses": [{"choices": [gen([42])]}] * 2},
            "a chat response takes one generate output",
        ),
        (
            {
                "generate_response": {
                    "choices": [gen([42], logprobs={"content": [{"logprob": -1}]})]
                }
            },
            "has neither `token` and `token_id`",
        ),
    ],
)
def test_bad_responses_fail_with_a_clear_error(
    breg: Registry, record: dict[str, Any], message: str
) -> None:
    """vLLM's test_derender_*_rejected: checked before any decoding; one error, nothing else."""
    run = respond(breg, **record)
    (err,) = errors(run)
    assert err["code"] == "invalid_request_error"
    assert message in err["message"]
    assert run.values("response") == []


def test_prompt_logprobs_must_match_the_prompt(breg: Registry) -> None:
    req = {"prompt": "hi", "echo": True, "logprobs": 0}
    bad = [None, {"104": {"logprob": -0.5}}]  # 2 entries, prompt is 3 tokens with <bos>
    run = Run(breg)
    run.feed(
        {
            "request_id": "r",
            "seq": 0,
            "type": "response",
            "api": "completion",
            "completion_request": req,
            "generate_response": {"choices": [gen(b("x"))], "prompt_logprobs": bad},
        }
    )
    (err,) = errors(run)
    assert (
        "prompt_logprobs length (2) does not match the prompt's token count (3)" in err["message"]
    )
