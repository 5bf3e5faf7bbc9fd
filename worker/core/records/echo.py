"""Completion `echo`: the prompt comes first in every choice's text (and logprobs).

The prompt is not kept in the state: a stream echoes it with the seq-0 record, a whole
response echoes each generate output's own prompt. Only the prompt text's length is
kept, where completion logprob offsets of the generated tokens start.
"""

from __future__ import annotations

from typing import Any

from worker.core import render
from worker.core.bounds import check_ids
from worker.core.errors import DerenderError
from worker.core.model import Model
from worker.core.records.request import prompt_ids_of, request_of
from worker.core.render import Output, Piece
from worker.core.state import RequestState
from worker.core.text.logprobs import Resolved, parse_prompt, top_limit
from worker.wire.inbound import ChatRequest, ChunkRecord, GenerateResponse


def echo_chunks(state: RequestState, record: ChunkRecord, model: Model) -> list[Output]:
    """A streamed completion with `echo`: the prompt text, first on every choice.

    Sent with the seq-0 record, one chunk per choice index (each choice's first text,
    as vLLM sends it, though vLLM glues it to the first generated text).
    """
    req = request_of(record, state.api)
    text = prompt_text(state, req, prompt_ids_of(record), 0, 1, model)
    state.opts.echo_len = len(text)
    if not text:
        return []
    return [render.chunk(state, record.request_id, [Piece(i, text)]) for i in range(state.opts.n)]


def whole_prompt(
    state: RequestState, record: ChunkRecord, resp: GenerateResponse, i: int, n: int, model: Model
) -> tuple[str, list[Resolved] | None]:
    """A whole completion's echo for generate output `i` of `n`: its prompt text, and
    its prompt logprobs resolved when they are shown ("", None without `echo`)."""
    opts = state.opts
    if not opts.echo:
        return "", None
    own_ids = resp.prompt_token_ids
    if own_ids is None and n == 1:
        own_ids = record.prompt_token_ids
    req = request_of(record, state.api)
    text = prompt_text(state, req, own_ids, i, n, model)
    # Prompt logprobs are shown only spliced into an echoed completion (chat passes the
    # engine's `prompt_logprobs` through unresolved, as vLLM does).
    if not (opts.logprobs or opts.no_request) or resp.prompt_logprobs is None:
        return text, None
    ids = prompt_ids(req, own_ids, i, n, model)
    limit = top_limit(state.api, opts.no_request, opts.top_logprobs)
    positions = parse_prompt(resp.prompt_logprobs, ids, model.vocab_size, limit)
    return text, model.resolver().resolve(positions, [], [], final=False)


def prompt_text(
    state: RequestState,
    req: ChatRequest | None,
    prompt_ids: list[int] | None,
    i: int,
    n: int,
    model: Model,
) -> str:
    """The echoed prompt of generate output `i` of `n`: the request's string prompt,
    else its token ids decoded (the request's token-id prompt, else the rendered
    `prompt_token_ids`)."""
    prompt = _pick_prompt(req.prompt if req is not None else None, i, n)
    if isinstance(prompt, str):
        return prompt
    ids = prompt if prompt is not None else prompt_ids
    if ids is None:
        raise DerenderError(
            "echo needs the prompt: a string or token-id `prompt` in completion_request, "
            "or prompt_token_ids",
            param="prompt",
        )
    check_ids(ids, model, "prompt")
    return model.detokenizer(state.opts.skip_special_tokens).decode(ids)


def prompt_ids(
    req: ChatRequest | None, prompt_ids: list[int] | None, i: int, n: int, model: Model
) -> list[int]:
    """The prompt's token ids, for its logprobs: as rendered, else the request's
    token-id prompt, else its string prompt encoded (with special tokens, as rendered)."""
    if prompt_ids is not None:
        return prompt_ids
    prompt = _pick_prompt(req.prompt if req is not None else None, i, n)
    if isinstance(prompt, list):
        check_ids(prompt, model, "prompt")
        return prompt
    if prompt is None:
        raise DerenderError(
            "echo with prompt_logprobs needs the prompt's token ids", param="prompt"
        )
    ids = list(model.tokenizer.encode(prompt, add_special_tokens=True).ids)
    check_ids(ids, model, "prompt")
    return ids


def _pick_prompt(prompt: str | list[Any] | None, i: int, n: int) -> str | list[int] | None:
    """Generate output `i` of `n`'s prompt from the completion request's `prompt`: a
    string, a token-id list, or a list of those (one per prompt, in render order)."""
    if isinstance(prompt, str):
        return prompt
    if not prompt:
        return None
    if all(type(t) is int for t in prompt):
        return prompt
    if len(prompt) != n:
        return None  # which prompt is this one's? unknown: fall back to its token ids
    one = prompt[i]
    if isinstance(one, str) or (isinstance(one, list) and all(type(t) is int for t in one)):
        return one
    return None
