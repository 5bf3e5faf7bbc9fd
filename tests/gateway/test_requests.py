"""The gateway's pure parts: the generate call made of a render answer, the seq-0 context,
a whole output gathered from a stream, the reply partitions, and its flags' errors."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.integration.harness import ROOT
from worker.errors import ConfigError
from worker.gateway.errors import Refused
from worker.gateway.replies import parse_partitions
from worker.gateway.requests import (
    COMPLETION_MAX_TOKENS,
    WholeOutput,
    context,
    generate_request,
    new_request_id,
    one_rendered,
)

RENDERED = {"request_id": "chatcmpl-x", "token_ids": [1, 2, 3], "sampling_params": {"seed": 7}}


@pytest.mark.parametrize(
    ("api", "body", "expected"),
    [
        ("chat", {}, None),  # (the engine's own bound: the model's length)
        ("chat", {"max_tokens": 16}, 16),
        ("chat", {"max_completion_tokens": 5, "max_tokens": 9}, 5),
        ("completion", {}, COMPLETION_MAX_TOKENS),
        ("completion", {"max_tokens": 16}, 16),
        ("completion", {"max_tokens": None}, None),
        ("completion", {"max_tokens": 40}, 40),
    ],
)
def test_generate_gets_the_max_tokens_render_dropped(
    api: str, body: dict[str, Any], expected: int | None
) -> None:
    rid = new_request_id(api)
    request = generate_request(api, RENDERED, body, rid)
    assert request["sampling_params"].get("max_tokens") == expected
    assert request["sampling_params"]["seed"] == 7
    assert request["request_id"] == rid and rid.startswith(("chatcmpl-", "cmpl-"))
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert request["token_ids"] == [1, 2, 3]


def test_a_max_tokens_render_kept_is_not_changed() -> None:
    rendered = {**RENDERED, "sampling_params": {"max_tokens": 3}}
    assert generate_request("chat", rendered, {"max_tokens": 3}, "c")["sampling_params"] == {
        "max_tokens": 3
    }


def test_the_seq0_context_names_the_request_and_its_reply_partition() -> None:
    body = {"model": "deepseek-v4", "messages": [], "stream": True}
    ctx = context("chat", body, RENDERED, 1767225600, 5)
    assert ctx == {
        "api": "chat",
        "model": "deepseek-v4",
        "created": 1767225600,
        "prompt_tokens": 3,
        "prompt_token_ids": [1, 2, 3],
        "chat_request": body,
        "reply_partition": 5,
    }
    completion = context("completion", {"prompt": "x"}, {**RENDERED, "model": "m"}, 1, None)
    assert completion["completion_request"] == {"prompt": "x"} and completion["model"] == "m"
    assert "reply_partition" not in completion


def test_a_completion_render_gives_one_prompts_request_or_a_refusal() -> None:
    assert one_rendered("completion", [RENDERED]) == RENDERED
    assert one_rendered("chat", RENDERED) == RENDERED
    with pytest.raises(Refused) as two:
        one_rendered("completion", [RENDERED, RENDERED])
    assert two.value.status == 400 and b"one prompt" in two.value.body
    with pytest.raises(Refused) as odd:
        one_rendered("chat", {"nothing": 1})
    assert odd.value.status == 502


def test_a_whole_output_joins_each_choices_tokens_and_logprobs() -> None:
    whole = WholeOutput("r")

    def lp(*ids: int) -> dict[str, Any]:
        return {"content": [{"token_id": i, "logprob": -0.5, "rank": 1} for i in ids]}

    whole.add({"choices": [{"index": 1, "token_ids": [7], "logprobs": lp(7)}]})
    whole.add({"choices": [{"index": 0, "token_ids": [1, 2], "logprobs": lp(1, 2)}]})
    whole.add({"choices": [{"index": 0, "token_ids": [3], "logprobs": lp(3)}], "usage": None})
    whole.add({"choices": [{"index": 1, "token_ids": [8], "finish_reason": "length"}]})
    end = {"index": 0, "token_ids": [], "finish_reason": "stop", "stop_reason": "x"}
    whole.add({"choices": [end]})
    whole.add({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}})
    out = whole.response()
    assert out["request_id"] == "r" and out["usage"]["completion_tokens"] == 5
    first, second = out["choices"]
    assert first["token_ids"] == [1, 2, 3] and second["token_ids"] == [7, 8]
    assert [c["token_id"] for c in first["logprobs"]["content"]] == [1, 2, 3]
    assert (first["finish_reason"], first["stop_reason"]) == ("stop", "x")
    assert (second["finish_reason"], second["stop_reason"]) == ("length", None)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, None),
        ("all", None),
        ("0-3", (0, 1, 2, 3)),
        ("4,0,2", (0, 2, 4)),
        ("0-1,5", (0, 1, 5)),
    ],
)
def test_reply_partitions(spec: str | None, expected: tuple[int, ...] | None) -> None:
    assert parse_partitions(spec) == expected


@pytest.mark.parametrize("spec", ["x", "3-1", "-2", "1,,2"])
def test_a_bad_reply_partition_spec_is_one_line(spec: str) -> None:
    with pytest.raises(ConfigError, match="--reply-partitions"):
        parse_partitions(spec)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        ([], "--engine-url is required"),
        (["--engine-url", "engine:8000"], "expected an http:// or https:// URL"),
        (["--engine-url", "http://e", "--reply-partitions", "a-b"], "--reply-partitions: 'a-b'"),
        (["--engine-url", "http://e", "--reply-timeout-s", "0"], "--reply-timeout-s must be"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(argv: list[str], line: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "worker", "gateway", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("derender-worker gateway: ") and line in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
