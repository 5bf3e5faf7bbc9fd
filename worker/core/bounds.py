"""The bounds (docs/integrate/contract.md, "Bounds"): sizes and ranges checked before any
tokenizer work.

A bound that does not hold raises `DerenderError` with `invalid_request_error` and a
message that names the bound and the value. Nothing here decodes a token, so a record
that would make the tokenizer work hard is refused cheaply.
"""

from __future__ import annotations

import msgspec

from worker.core.errors import DerenderError
from worker.core.model import Model, Registry
from worker.core.render import Output
from worker.wire.inbound import (
    ChatRequest,
    GenerateResponse,
    GenerateStreamResponse,
    Logprobs,
    ResponseChoice,
)

# OpenAI's own bound on `n`. The state holds one entry per choice and `abort` finishes
# every unseen choice, so an unbounded `n` would let one record grow a state (and its
# output) without limit (docs/integrate/contract.md, "Guarantees").
MAX_N = 128

# vLLM's VLLM_MAX_N_SEQUENCES default: most generate outputs (completion prompts) and
# choices per output one `response` record may carry.
MAX_N_SEQUENCES = 16384


def check_ids(ids: list[int], model: Model, what: str) -> None:
    count = len(ids)
    if count > model.max_model_len:
        raise DerenderError(
            f"{what} length ({count}) exceeds max_model_len ({model.max_model_len}).",
            param=what,
        )
    # A streamed record's usual single id: one comparison, not a min and a max over a list
    # (a bad one falls through to the message below).
    if count == 1 and 0 <= ids[0] < model.vocab_size:
        return
    if ids and (min(ids) < 0 or max(ids) >= model.vocab_size):
        bad = next(i for i in ids if i < 0 or i >= model.vocab_size)
        raise DerenderError(
            f"{what} contains token id {bad} outside the vocabulary [0, {model.vocab_size}).",
            param=what,
        )


def check_options(top_logprobs: int, n: int, model: Model) -> None:
    """The request's own asks: `top_logprobs` (or completion `logprobs: k`) and `n`."""
    if model.max_logprobs >= 0 and top_logprobs > model.max_logprobs:
        raise DerenderError(
            f"top_logprobs ({top_logprobs}) exceeds max_logprobs ({model.max_logprobs}).",
            param="top_logprobs",
        )
    if not 1 <= n <= MAX_N:
        raise DerenderError(f"n must be between 1 and {MAX_N}, got {n}", param="n")


def check_lists(req: ChatRequest, registry: Registry) -> bytes:
    """The request's lists whose size scales the work of every later record or the
    tables' compilation: stop strings (count, length), stop token ids, tools (count and
    total JSON bytes). Each bound is a registry option (`[limits]`); the error names it.
    Returns the tools as JSON (b"" for none), what the request's tool table is keyed by."""
    stop = req.stop
    stops = [stop] if isinstance(stop, str) else (stop or [])
    _at_most(len(stops), registry.max_stop_strings, "stop strings", "max_stop_strings", "stop")
    if stops:
        longest = max(len(s) for s in stops)
        _at_most(
            longest,
            registry.max_stop_length,
            "the longest stop string's characters",
            "max_stop_length",
            "stop",
        )
    ids = req.stop_token_ids or ()
    _at_most(
        len(ids),
        registry.max_stop_token_ids,
        "stop token ids",
        "max_stop_token_ids",
        "stop_token_ids",
    )
    tools = req.tools or ()
    _at_most(len(tools), registry.max_tools, "tools", "max_tools", "tools")
    if not tools:
        return b""
    raw = msgspec.json.encode(tools)
    _at_most(
        len(raw), registry.max_tools_bytes, "the tools' JSON bytes", "max_tools_bytes", "tools"
    )
    return raw


def _at_most(value: int, bound: int, what: str, name: str, param: str) -> None:
    if value > bound:
        raise DerenderError(f"{what}: {value} exceeds the bound ({name} = {bound}).", param=param)


def check_logprobs(lp: Logprobs | None, index: int, model: Model) -> None:
    if lp is None or lp.content is None:
        return
    if len(lp.content) > model.max_model_len:
        raise DerenderError(
            f"logprobs.content length ({len(lp.content)}) in choice {index} exceeds "
            f"max_model_len ({model.max_model_len}).",
            param="logprobs",
        )
    if model.max_logprobs >= 0:
        for entry in lp.content:
            top = entry.top_logprobs
            if top is not None and len(top) > model.max_logprobs:
                raise DerenderError(
                    f"top_logprobs count ({len(top)}) in choice {index} exceeds "
                    f"max_logprobs ({model.max_logprobs}).",
                    param="logprobs",
                )


def check_chunk(chunk: GenerateStreamResponse, model: Model) -> None:
    choices = chunk.choices
    if len(choices) == 1:  # the streamed record: one choice, usually one id, no logprobs
        choice = choices[0]
        ids = choice.token_ids
        if (
            choice.index >= 0
            and choice.logprobs is None
            and (
                not ids
                or (len(ids) == 1 and 0 <= ids[0] < model.vocab_size and model.max_model_len >= 1)
            )
        ):
            return  # (anything else is checked, and reported, below)
    if len(choices) > 1:
        raise DerenderError(
            f"generate_chunk has {len(chunk.choices)} choices; the worker expects at most "
            "one choice per chunk",
            param="generate_chunk.choices",
        )
    for choice in chunk.choices:
        if choice.index < 0:
            raise DerenderError("choice index must not be negative", param="index")
        if choice.token_ids:
            check_ids(choice.token_ids, model, "token_ids")
        if choice.logprobs is not None:
            check_logprobs(choice.logprobs, choice.index, model)


def check_generate_outputs(count: int) -> None:
    if count > MAX_N_SEQUENCES:
        raise DerenderError(
            f"generate_responses count ({count}) exceeds the maximum ({MAX_N_SEQUENCES}).",
            param="generate_responses",
        )


def check_response(resp: GenerateResponse, model: Model) -> None:
    """One whole generate output, except its choices (see `check_response_choice`)."""
    if len(resp.choices) > MAX_N_SEQUENCES:
        raise DerenderError(
            f"choices count ({len(resp.choices)}) in response '{resp.request_id}' exceeds "
            f"the maximum ({MAX_N_SEQUENCES}).",
            param="choices",
        )
    if resp.prompt_token_ids is not None:
        check_ids(resp.prompt_token_ids, model, "prompt_token_ids")
    if resp.prompt_logprobs is not None and len(resp.prompt_logprobs) > model.max_model_len:
        raise DerenderError(
            f"prompt_logprobs length ({len(resp.prompt_logprobs)}) in response "
            f"'{resp.request_id}' exceeds max_model_len ({model.max_model_len}).",
            param="prompt_logprobs",
        )


def check_response_choice(choice: ResponseChoice, model: Model) -> None:
    if not choice.token_ids:
        raise DerenderError(f"choice {choice.index} has empty or null token_ids", param="token_ids")
    check_ids(choice.token_ids, model, "token_ids")
    check_logprobs(choice.logprobs, choice.index, model)


def output_too_large(output: Output, max_output_bytes: int) -> DerenderError:
    """The error for an output over `max_output_bytes`. Each output becomes one broker
    record: one over the broker's message size would be refused on every retry and
    block its partition (Kafka's `max.message.bytes`)."""
    return DerenderError(
        f"{output.kind} output of {len(output.value)} bytes exceeds the output size limit "
        f"(max_output_bytes = {max_output_bytes} bytes)"
    )
