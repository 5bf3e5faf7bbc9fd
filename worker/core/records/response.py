"""Whole responses: a `response` record → one non-streaming `chat.completion` / `text_completion`.

Each choice runs through the same `decode_choice` as streaming, in one piece and final,
so both paths give the same text and logprobs for the same tokens. A chat response takes
one generate output; a completion one generate output per prompt, its choices numbered
in arrival order.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from worker.core import apis, render
from worker.core.bounds import check_generate_outputs, check_response, check_response_choice
from worker.core.errors import DerenderError
from worker.core.model import Model
from worker.core.records.echo import whole_prompt
from worker.core.records.engine_metrics import full_metrics
from worker.core.render import ROLE, Output
from worker.core.state import DONE, ChoiceState, RequestState
from worker.core.tables import Tables
from worker.core.text.decode import Decoded, decode_choice, shown_positions, unhidden
from worker.core.text.detokenize import Detokenizer
from worker.core.text.logprobs import Position, Resolved, chat_logprobs, completion_logprobs
from worker.core.usage import usage
from worker.wire import outbound as out
from worker.wire.inbound import ChunkRecord, GenerateResponse, ResponseChoice

# A generate output's choices, each with the logprob positions to show.
Checked = list[tuple[ResponseChoice, list[Position] | None]]


def on_response(
    state: RequestState, record: ChunkRecord, model: Model, tables: Tables
) -> list[Output]:
    responses = _generate_outputs(record, state.api)
    checked = [_checked(state, resp, model) for resp in responses]  # before any decoding
    if state.prompt_tokens is None:  # not on the record: once per generate output
        state.prompt_tokens = sum(_prompt_count(r) for r in responses)
    prompt = state.prompt_tokens
    completion = sum(len(c.token_ids or []) for resp in responses for c in resp.choices)
    if state.api != "completion":
        output = _chat(
            state, record.request_id, responses[0], checked[0], model, tables, prompt, completion
        )
    else:
        output = _completion(state, record, responses, checked, model, tables, prompt, completion)
    state.status = DONE
    return [output]


def _chat(
    state: RequestState,
    request_id: str,
    resp: GenerateResponse,
    checked: Checked,
    model: Model,
    tables: Tables,
    prompt: int,
    completion: int,
) -> Output:
    metrics = full_metrics(resp.metrics, "generate_response.metrics")
    seed = _seed(state, resp, True, model.detokenizer(state.opts.skip_special_tokens))
    if state.fmt is not None:  # Responses, Messages: the format's whole object
        if len(checked) != 1 or checked[0][0].index != 0:
            raise DerenderError(
                f"the {state.api} API takes one choice (index 0); got {len(checked)}",
                param="generate_response.choices",
            )
        choice, positions = checked[0]
        d = _decoded(state, choice, positions, seed, model, tables)
        message, finish, events = out.ChatMessage(role=ROLE, content=d.text), d.finish_reason, None
        if state.parser is not None:  # (the parser's events too: the formats keep their order)
            w = model.parser.whole(state.parser, 0, d.text, d.text_ids, finish, tables.tools)
            message, finish, events = w.message, w.finish_reason, w.events
        return apis.on_whole(
            state, request_id, message, events, finish, d.stop_reason, usage(prompt, completion)
        )
    choices = [
        _chat_choice(state, choice, positions, seed, model, tables) for choice, positions in checked
    ]
    return render.response(
        state,
        request_id,
        choices=choices,
        usage=usage(prompt, completion),
        # The engine's prompt logprobs go through unresolved, as vLLM passes them.
        prompt_logprobs=resp.prompt_logprobs,
        kv_transfer_params=resp.kv_transfer_params,
        metrics=UNSET if metrics is None else metrics,
    )


def _chat_choice(
    state: RequestState,
    choice: ResponseChoice,
    positions: list[Position] | None,
    seed: list[int],
    model: Model,
    tables: Tables,
) -> out.ChatChoice:
    d = _decoded(state, choice, positions, seed, model, tables)
    message = out.ChatMessage(role=ROLE, content=d.text)
    resolved, finish = d.logprobs, d.finish_reason
    if state.parser is not None:  # the streaming engine, fed once
        w = model.parser.whole(state.parser, choice.index, d.text, d.text_ids, finish, tables.tools)
        message, finish = w.message, w.finish_reason
        resolved = unhidden(resolved, w.hidden)
    return out.ChatChoice(
        index=choice.index,  # chat keeps the engine's index
        message=message,
        logprobs=chat_logprobs(resolved) if resolved is not None else None,
        finish_reason=finish,
        stop_reason=d.stop_reason,
    )


def _completion(
    state: RequestState,
    record: ChunkRecord,
    responses: list[GenerateResponse],
    checked: list[Checked],
    model: Model,
    tables: Tables,
    prompt: int,
    completion: int,
) -> Output:
    detok = model.detokenizer(state.opts.skip_special_tokens)
    n = len(responses)
    # vLLM's rule: metrics describe one prompt; several prompts' cannot be merged.
    where = "generate_response" if record.generate_response else "generate_responses.0"
    metrics = full_metrics(responses[0].metrics, f"{where}.metrics") if n == 1 else None
    choices: list[out.CompletionChunkChoice] = []
    for i, (resp, resp_checked) in enumerate(zip(responses, checked, strict=True)):
        seed = _seed(state, resp, n == 1, detok)
        echo_text, prompt_lp = whole_prompt(state, record, resp, i, n, model)
        for choice, positions in resp_checked:
            d = _decoded(state, choice, positions, seed, model, tables)
            choices.append(
                out.CompletionChunkChoice(
                    index=len(choices),  # completion numbers choices in arrival order
                    text=echo_text + d.text,
                    logprobs=_completion_logprobs(state, d.logprobs, prompt_lp, echo_text),
                    finish_reason=d.finish_reason,
                    stop_reason=d.stop_reason,
                )
            )
    return render.response(
        state,
        record.request_id,
        choices=choices,
        usage=usage(prompt, completion),
        kv_transfer_params=_agreed([r.kv_transfer_params for r in responses]),
        metrics=UNSET if metrics is None else metrics,
    )


def _completion_logprobs(
    state: RequestState,
    resolved: list[Resolved] | None,
    prompt_lp: list[Resolved] | None,
    echo_text: str,
) -> out.CompletionLogprobs | None:
    if prompt_lp is not None and (state.opts.hide_output or resolved is not None):
        # Prompt logprobs first, then the generated tokens' (offsets continue).
        return completion_logprobs(prompt_lp + (resolved or []), 0)[0]
    if resolved is not None:
        return completion_logprobs(resolved, len(echo_text))[0]
    return None


def _decoded(
    state: RequestState,
    choice: ResponseChoice,
    positions: list[Position] | None,
    seed: list[int],
    model: Model,
    tables: Tables,
) -> Decoded:
    if state.opts.hide_output:  # prompt-only echo shows no generated token
        return Decoded("", choice.finish_reason, choice.stop_reason, None, [])
    cs = ChoiceState(index=choice.index, window=list(seed))
    ids = choice.token_ids or []
    return decode_choice(
        state, cs, ids, choice.finish_reason, choice.stop_reason, model, tables, True, positions
    )


def _seed(
    state: RequestState, resp: GenerateResponse, single: bool, detok: Detokenizer
) -> list[int]:
    """The decode window a generate output's choices start from: the request's prompt
    tail when there is one output and the request had it, else the output's own."""
    if resp.prompt_token_ids and not (single and state.seed):
        return detok.seed(resp.prompt_token_ids)
    return state.seed


def _generate_outputs(record: ChunkRecord, api: str) -> list[GenerateResponse]:
    one, many = record.generate_response, record.generate_responses
    if (one is None) == (many is None):
        which = "both" if one is not None else "neither"
        raise DerenderError(
            f"a `response` record needs `generate_response` or `generate_responses` "
            f"(it has {which})",
            param="generate_response",
        )
    if one is not None:
        return [one]
    assert many is not None
    if not many:
        raise DerenderError("generate_responses must not be empty", param="generate_responses")
    if api != "completion" and len(many) > 1:
        raise DerenderError(
            f"a chat response takes one generate output; got {len(many)} generate_responses",
            param="generate_responses",
        )
    check_generate_outputs(len(many))
    return many


def _checked(state: RequestState, resp: GenerateResponse, model: Model) -> Checked:
    """Bounds and payload checks of one generate output, before any tokenizer work."""
    check_response(resp, model)
    checked = []
    for choice in resp.choices:
        check_response_choice(choice, model)
        ids = choice.token_ids or []
        checked.append((choice, shown_positions(state, choice.logprobs, ids, choice.index, model)))
    return checked


def _prompt_count(resp: GenerateResponse) -> int:
    if resp.prompt_token_ids is not None:
        return len(resp.prompt_token_ids)
    if resp.usage is not None and resp.usage.prompt_tokens is not None:
        return resp.usage.prompt_tokens
    return 0


def _agreed(values: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The one value every generate output agrees on, else null (vLLM's completion rule
    for `kv_transfer_params`: a disagreement cannot be merged)."""
    first = values[0]
    return first if all(v == first for v in values[1:]) else None
