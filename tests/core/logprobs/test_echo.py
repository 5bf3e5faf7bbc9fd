"""Completion `echo`: the prompt first, its logprobs spliced before the generated ones.

Docstrings name the tests of vLLM's Rust port a case mirrors (its
rust/src/server/src/routes/tests.rs; test tokenizer: token id = UTF-8 byte, `<bos>` = 256).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.logprobs.logprob_builders import (
    byte_tokenizer,
    completion_lp,
    entry,
    errors,
    lp_chunk,
)
from tests.support.helpers import Run, chunk, end, registry
from worker.core.model import Registry


@pytest.fixture(scope="module")
def breg() -> Registry:
    return registry(byte_tokenizer(), name="render-model", max_model_len=128)


def b(text: str) -> list[int]:
    return list(text.encode())


def whole(
    reg: Registry,
    req: dict[str, Any],
    ids: list[int],
    content: list[Any] | None = None,
    **resp: Any,
) -> dict[str, Any]:
    """One `response` record for api completion; returns the `text_completion`."""
    choice: dict[str, Any] = {"index": 0, "token_ids": ids, "finish_reason": "length"}
    if content is not None:
        choice["logprobs"] = {"content": content}
    run = Run(reg)
    run.feed(
        {
            "request_id": "cmpl-1",
            "seq": 0,
            "type": "response",
            "api": "completion",
            "completion_request": req,
            "generate_response": {"request_id": "cmpl-1", "choices": [choice], **resp},
        }
    )
    assert errors(run) == []
    (value,) = run.values("response")
    return value  # type: ignore[no-any-return]


@pytest.mark.parametrize("prompt", ["hi ", b("hi ")])
def test_echo_prepends_the_prompt(breg: Registry, prompt: str | list[int]) -> None:
    """derender_completion_echo_prepends_prompt: a string prompt, or a token-id prompt decoded."""
    resp = whole(breg, {"prompt": prompt, "echo": True, "max_tokens": 5}, b("there"))
    assert resp["choices"][0]["text"] == "hi there"


def test_prompt_only_echo_hides_the_generated_token(breg: Registry) -> None:
    """derender_completion_prompt_only_echo_hides_internal_token: max_tokens 0 → only the
    prompt; the engine's one token is not shown, but it was generated, so usage counts it
    (vLLM's coupled server does the same)."""
    resp = whole(breg, {"prompt": "hi ", "echo": True, "max_tokens": 0}, b("x"))
    assert resp["choices"][0]["text"] == "hi "
    assert resp["choices"][0]["logprobs"] is None
    assert resp["usage"]["completion_tokens"] == 1


PROMPT_LOGPROBS = [
    None,
    {"104": {"logprob": -0.5, "rank": 1, "decoded_token": "token_id:104"}},
    {"105": {"logprob": -0.25, "rank": 1, "decoded_token": "token_id:105"}},
]


def test_prompt_only_echo_returns_prompt_logprobs(breg: Registry) -> None:
    """derender_completion_prompt_only_echo_returns_prompt_logprobs: the re-encoded prompt
    is [<bos>, h, i]; "<bos>" is 5 characters wide."""
    req = {"prompt": "hi", "echo": True, "max_tokens": 0, "logprobs": 1}
    resp = whole(breg, req, b("x"), [entry(120, -0.1)], prompt_logprobs=PROMPT_LOGPROBS)
    assert resp["choices"][0]["text"] == "hi"
    assert resp["choices"][0]["logprobs"] == {
        "text_offset": [0, 5, 6],
        "token_logprobs": [None, -0.5, -0.25],
        "tokens": ["<bos>", "h", "i"],
        "top_logprobs": [None, {"h": -0.5}, {"i": -0.25}],
    }


def test_echo_shifts_logprob_offsets_by_the_prompt(breg: Registry) -> None:
    """derender_completion_echo_shifts_logprob_offsets: no prompt_logprobs → generated
    offsets start after the prompt text."""
    req = {"prompt": "say ", "echo": True, "max_tokens": 5, "logprobs": 0}
    resp = whole(breg, req, b("hi"), [entry(104, -1.0), entry(105, -2.0)])
    (choice,) = resp["choices"]
    assert choice["text"] == "say hi"
    assert choice["logprobs"]["text_offset"] == [4, 5]
    assert choice["logprobs"]["tokens"] == ["h", "i"]


def test_prompt_logprobs_are_spliced_before_the_generated_ones(breg: Registry) -> None:
    req = {"prompt": "hi", "echo": True, "max_tokens": 5, "logprobs": 0}
    content = [entry(33, -1.0, [(33, -1.0), (63, -3.0)])]  # "!" (candidate "?")
    resp = whole(breg, req, b("!"), content, prompt_logprobs=PROMPT_LOGPROBS)
    assert resp["choices"][0]["text"] == "hi!"
    assert resp["choices"][0]["logprobs"] == {
        "text_offset": [0, 5, 6, 7],
        "token_logprobs": [None, -0.5, -0.25, -1.0],
        "tokens": ["<bos>", "h", "i", "!"],
        "top_logprobs": [None, {"h": -0.5}, {"i": -0.25}, {"!": -1.0}],
    }


def test_rendered_prompt_ids_win_over_re_encoding(breg: Registry) -> None:
    """The prompt's token ids as rendered (no <bos> here) are what the engine scored."""
    req = {"prompt": "hi", "echo": True, "max_tokens": 0, "logprobs": 0}
    pl = PROMPT_LOGPROBS[1:]
    resp = whole(breg, req, b("x"), None, prompt_logprobs=[None, *pl[1:]], prompt_token_ids=b("hi"))
    assert resp["choices"][0]["logprobs"]["tokens"] == ["h", "i"]


def test_one_text_completion_for_several_prompts(breg: Registry) -> None:
    """generate_responses: one per prompt, each echoing its own prompt, re-indexed."""
    run = Run(breg)
    responses = [
        {"request_id": "cmpl-x-0", "choices": [{"index": 0, "token_ids": b(" one")}]},
        {"request_id": "cmpl-x-1", "choices": [{"index": 0, "token_ids": b(" two")}]},
    ]
    run.feed(
        {
            "request_id": "cmpl-x",
            "seq": 0,
            "type": "response",
            "api": "completion",
            "completion_request": {"prompt": ["Say", b("Shout")], "echo": True},
            "generate_responses": responses,
        }
    )
    (resp,) = run.values("response")
    assert [(c["index"], c["text"]) for c in resp["choices"]] == [
        (0, "Say one"),
        (1, "Shout two"),
    ]


def test_echo_without_a_known_prompt_is_an_error(breg: Registry) -> None:
    run = Run(breg)
    rec = chunk("r", 0, b("x"), api="completion", completion_request={"echo": True})
    run.feed(rec)
    (err,) = errors(run)
    assert err["param"] == "prompt"
    assert "echo needs the prompt" in err["message"]


# -- streaming ------------------------------------------------------------------------


def test_streamed_echo_sends_the_prompt_first_on_every_choice(breg: Registry) -> None:
    run = Run(breg)
    req = {"prompt": "Q: ", "echo": True, "n": 2, "logprobs": 0}
    run.feed(
        lp_chunk(
            "r",
            0,
            b("ab"),
            [entry(97, -1.0), entry(98, -1.0)],
            api="completion",
            completion_request=req,
        )
    )
    run.feed(lp_chunk("r", 1, b("c"), [entry(99, -1.0)], "stop", index=1))
    run.feed(lp_chunk("r", 2, b("d"), [entry(100, -1.0)], "stop", index=0))
    run.feed(end("r", 3))
    heads = [v["choices"][0] for v in run.values("chunk")[:2]]
    assert [(c["index"], c["text"], c["logprobs"]) for c in heads] == [
        (0, "Q: ", None),
        (1, "Q: ", None),
    ]
    assert (run.text(index=0), run.text(index=1)) == ("Q: abd", "Q: c")
    assert completion_lp(run, 0)["text_offset"] == [3, 4, 5]
    assert completion_lp(run, 1)["text_offset"] == [3]


def test_streamed_prompt_only_echo_shows_no_generated_text(breg: Registry) -> None:
    run = Run(breg)
    req = {"prompt": b("hi "), "echo": True, "max_tokens": 0, "logprobs": 0}
    run.feed(
        lp_chunk(
            "r", 0, b("x"), [entry(120, -1.0)], "length", api="completion", completion_request=req
        )
    )
    run.feed(end("r", 1))
    assert run.text() == "hi "
    finals = [c for v in run.values("chunk") for c in v["choices"] if c["finish_reason"]]
    assert [(c["text"], c["logprobs"], c["finish_reason"]) for c in finals] == [
        ("", None, "length")
    ]


def test_echo_is_for_completions_only(breg: Registry) -> None:
    run = Run(breg)
    run.feed(chunk("r", 0, b("ok"), "stop", chat_request={"echo": True, "prompt": "p"}))
    assert run.text() == "ok"
