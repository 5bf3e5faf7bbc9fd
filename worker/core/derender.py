"""`step(state, record) -> (state, outputs)`: the whole derender decision, pure.

No I/O, no clock, no randomness: the tokenizer and limits arrive in the `Registry`,
`created` comes from the seq-0 record (or its broker timestamp, passed in). The same
state and record always give the same bytes, which is what makes redelivery after a
crash and offline replay safe.

One record is handled in numbered steps:
  1. sequencing: duplicates, gaps, failed and finished requests, missing state;
  2. seq 0 opens the request: model, options, bounds, `created`;
  3. bounds of the record's payload, before any tokenizer work;
  4. the payload: `chunk` (detokenize → stop → delta), `response`, `end`, `abort`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from worker.core import errors
from worker.core.detokenize import Detokenizer
from worker.core.errors import DerenderError
from worker.core.logprobs import (
    Position,
    Resolved,
    chat_logprobs,
    completion_logprobs,
    parse_generate,
    parse_prompt,
    top_limit,
)
from worker.core.model import Model, Registry
from worker.core.parsers import (
    feed,
    finish_reason,
    for_choice,
    open_parser,
    parse_whole,
    to_delta,
    to_message,
    uses_parser,
)
from worker.core.state import ACTIVE, DONE, FAILED, ChoiceState, Options, RequestState
from worker.core.stop import apply_stop, normalize_stop
from worker.core.usage import usage
from worker.wire import outbound as out
from worker.wire.inbound import (
    ChatRequest,
    ChunkRecord,
    GenerateResponse,
    GenerateStreamResponse,
    Logprobs,
    ResponseChoice,
    StreamChoice,
)

# Output kinds (the `derender-kind` header).
CHUNK = "chunk"
RESPONSE = "response"
ERROR = "error"
DONE_KIND = "done"

# Step results, for metrics.
OK = "ok"
DUPLICATE = "duplicate"
FAILED_RESULT = "error"
SKIPPED = "skipped"  # consumed silently: the request had already failed or finished

# OpenAI's own bound on `n`. The state holds one entry per choice and `abort` finishes
# every unseen choice, so an unbounded `n` would let one record grow a state (and its
# output) without limit (CONTRACT.md §4.6).
MAX_N = 128

ROLE = "assistant"
FINISH_ABORT = "abort"
FINISH_STOP = "stop"

# vLLM's VLLM_MAX_N_SEQUENCES default: most generate outputs (completion prompts) and
# choices per output one `response` record may carry.
MAX_N_SEQUENCES = 16384


@dataclass(slots=True)
class Output:
    kind: str
    value: bytes


@dataclass(slots=True)
class Step:
    state: RequestState | None  # None: nothing to store (no request was opened)
    outputs: list[Output]
    result: str


_DONE = Output(DONE_KIND, out.DONE)


def error_output(exc: DerenderError) -> Output:
    body = out.ErrorResponse(out.ErrorBody(exc.message, exc.type, exc.param, exc.code))
    return Output(ERROR, out.encode(body))


def step(
    state: RequestState | None,
    record: ChunkRecord,
    registry: Registry,
    timestamp_ms: int | None = None,
    state_corrupt: bool = False,
) -> Step:
    """Apply one record to its request's state.

    `state` is the stored state (None when there is none); `state_corrupt` says the
    stored blob could not be decoded. The returned state is what to store.
    """
    # 1) Sequencing.
    if state_corrupt:
        return _fail(
            None,
            record,
            DerenderError("request state could not be decoded", errors.STATE_CORRUPT),
        )
    if state is not None:
        if record.seq <= state.seq:
            return Step(state, [], DUPLICATE)
        if state.status != ACTIVE:
            state.seq = record.seq
            if state.status == FAILED and record.type in ("end", "abort"):
                state.status = DONE
                return Step(state, [_DONE], SKIPPED)
            return Step(state, [], SKIPPED)
        if record.seq > state.seq + 1:
            return _fail(
                state,
                record,
                DerenderError(
                    f"sequence gap: got seq {record.seq}, expected {state.seq + 1}",
                    errors.SEQUENCE_GAP,
                    "seq",
                ),
            )
    elif record.seq > 0:
        return _fail(
            None,
            record,
            DerenderError(
                f"no state for request {record.request_id!r} at seq {record.seq}: "
                "it expired or seq 0 was never seen",
                errors.STATE_MISSING,
                "seq",
            ),
        )

    try:
        # 2) Open the request.
        outputs: list[Output] = []
        opening = state is None
        if state is None:
            state = _open(record, registry, timestamp_ms)
        else:
            state.seq = record.seq
        model = registry.resolve(state.model)
        if model is None:  # the registry changed under a live request
            raise DerenderError(
                f"The model `{state.model}` does not exist.", errors.MODEL_NOT_FOUND, "model"
            )
        if opening and state.opts.echo and record.type != "response":
            outputs = _echo_chunks(state, record, model)
        # 3) + 4) The payload.
        if record.type == "chunk":
            outputs += _on_chunk(state, record.request_id, record.generate_chunk, model)
        elif record.type == "response":
            outputs += _on_response(state, record, model)
        elif record.type == "end":
            outputs += _on_end(state, record.request_id, model, abort=False)
        else:
            outputs += _on_end(state, record.request_id, model, abort=True)
    except DerenderError as exc:
        return _fail(state, record, exc)
    return Step(state, outputs, OK)


def step_invalid(state: RequestState | None, request_id: str, seq: int | None, reason: str) -> Step:
    """A record that failed schema validation but whose request_id could be read.

    With a readable seq that is new, the request is failed as with any bad record;
    without one, only the error is reported (the state is left alone).
    """
    exc = DerenderError(reason, errors.INVALID_RECORD)
    if seq is None:
        return Step(state, [error_output(exc)], FAILED_RESULT)
    if state is not None and seq <= state.seq:
        return Step(state, [], DUPLICATE)
    if state is not None and state.status != ACTIVE:
        state.seq = seq
        return Step(state, [], SKIPPED)
    failed = RequestState(seq=seq, status=FAILED)
    return Step(failed, [error_output(exc)], FAILED_RESULT)


# -- 1) failures ----------------------------------------------------------------------


def _fail(state: RequestState | None, record: ChunkRecord, exc: DerenderError) -> Step:
    """Report the error once; the request is failed from here on.

    An `end`/`abort` record still closes the stream with `[DONE]` so that a client
    waiting on it is released.
    """
    outputs = [error_output(exc)]
    status = FAILED
    if record.type in ("end", "abort"):
        outputs.append(_DONE)
        status = DONE
    failed = RequestState(seq=record.seq, status=status)
    if state is not None:
        failed.api, failed.model, failed.created = state.api, state.model, state.created
    return Step(failed, outputs, FAILED_RESULT)


# -- 2) opening a request -------------------------------------------------------------


def _open(record: ChunkRecord, registry: Registry, timestamp_ms: int | None) -> RequestState:
    model = registry.resolve(record.model)
    if model is None:
        raise DerenderError(
            f"The model `{record.model}` does not exist.", errors.MODEL_NOT_FOUND, "model"
        )
    api = record.api or "chat"
    req = _request(record, api)
    prompt_ids = record.prompt_token_ids
    if prompt_ids is None and record.generate_chunk is not None:
        prompt_ids = record.generate_chunk.prompt_token_ids
    if prompt_ids is not None:
        _check_ids(prompt_ids, model, "prompt_token_ids")
    if record.prompt_tokens is not None and record.prompt_tokens < 0:
        raise DerenderError("prompt_tokens must not be negative", param="prompt_tokens")
    opts = _options(req, api, model)
    created = record.created
    if created is None:
        created = timestamp_ms // 1000 if timestamp_ms is not None else 0
    state = RequestState(
        seq=record.seq,
        api=api,
        model=model.name,
        created=created,
        prompt_tokens=(
            record.prompt_tokens
            if record.prompt_tokens is not None
            else (len(prompt_ids) if prompt_ids is not None else None)
        ),
        opts=opts,
    )
    if api == "chat":
        template = open_parser(
            model.parser, req, prompt_ids, record.request_id, strict=model.strict_tool_calling
        )
        if uses_parser(model.parser, template):
            state.parser = template
            # The parser reads its markers in the text: special tokens stay in (it drops
            # the specials that are not markers itself, as vLLM's parsers do).
            opts.skip_special_tokens = False
    state.seed = model.detokenizer(opts.skip_special_tokens).seed(prompt_ids)
    return state


def _request(record: ChunkRecord, api: str) -> ChatRequest | None:
    req = record.chat_request if api == "chat" else record.completion_request
    if req is None:  # the other flavour's request is still the request
        req = record.completion_request if api == "chat" else record.chat_request
    return req


def _options(req: ChatRequest | None, api: str, model: Model) -> Options:
    if req is None:
        return Options(no_request=True)
    so = req.stream_options
    include_usage = bool(so and so.include_usage)
    if api == "chat":
        logprobs = bool(req.logprobs)
        top = req.top_logprobs or 0
    else:
        # Completion: `logprobs: k` asks for k top candidates (0 = only the sampled one).
        lp = req.logprobs
        logprobs = lp is not None and lp is not False
        top = 0 if isinstance(lp, bool) or lp is None else lp
    if model.max_logprobs >= 0 and top > model.max_logprobs:
        raise DerenderError(
            f"top_logprobs ({top}) exceeds max_logprobs ({model.max_logprobs}).",
            param="top_logprobs",
        )
    if not 1 <= req.n <= MAX_N:
        raise DerenderError(f"n must be between 1 and {MAX_N}, got {req.n}", param="n")
    echo = api == "completion" and req.echo
    return Options(
        skip_special_tokens=req.skip_special_tokens,
        stop=normalize_stop(req.stop),
        stop_token_ids=list(req.stop_token_ids or ()),
        include_stop_str_in_output=req.include_stop_str_in_output,
        include_usage=include_usage,
        # vLLM sends continuous usage only when include_usage is on as well.
        continuous_usage_stats=include_usage and bool(so and so.continuous_usage_stats),
        n=req.n,
        logprobs=logprobs,
        top_logprobs=top,
        include_reasoning=req.include_reasoning,
        echo=echo,
        hide_output=echo and req.max_tokens == 0,
    )


# -- 3) bounds ------------------------------------------------------------------------


def _check_ids(ids: list[int], model: Model, what: str) -> None:
    if len(ids) > model.max_model_len:
        raise DerenderError(
            f"{what} length ({len(ids)}) exceeds max_model_len ({model.max_model_len}).",
            param=what,
        )
    if ids and (min(ids) < 0 or max(ids) >= model.vocab_size):
        bad = next(i for i in ids if i < 0 or i >= model.vocab_size)
        raise DerenderError(
            f"{what} contains token id {bad} outside the vocabulary [0, {model.vocab_size}).",
            param=what,
        )


def _check_logprobs(lp: Logprobs | None, index: int, model: Model) -> None:
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


def _check_chunk(chunk: GenerateStreamResponse, model: Model) -> None:
    if len(chunk.choices) > 1:
        raise DerenderError(
            f"generate_chunk has {len(chunk.choices)} choices; the worker expects at most "
            "one choice per chunk",
            param="generate_chunk.choices",
        )
    for choice in chunk.choices:
        if choice.index < 0:
            raise DerenderError("choice index must not be negative", param="index")
        if choice.token_ids:
            _check_ids(choice.token_ids, model, "token_ids")
        _check_logprobs(choice.logprobs, choice.index, model)


# -- 4) payloads ----------------------------------------------------------------------

LogprobsOut = out.ChatLogprobs | out.CompletionLogprobs


@dataclass(slots=True)
class _Piece:
    """What one record contributes to one choice, before rendering."""

    index: int
    text: str = ""
    role: bool = False
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    logprobs: LogprobsOut | None = None
    # Parser path: reasoning / content / tool calls of this record (None: say nothing).
    delta: out.Delta | None = None


def _on_chunk(
    state: RequestState, request_id: str, chunk: GenerateStreamResponse | None, model: Model
) -> list[Output]:
    if chunk is None:
        raise DerenderError("a `chunk` record needs `generate_chunk`", param="generate_chunk")
    _check_chunk(chunk, model)
    outputs: list[Output] = []
    if chunk.choices:
        choice = chunk.choices[0]
        positions = _positions(state, choice.logprobs, choice.token_ids or [], choice.index, model)
        piece = _advance(state, choice, positions, model)
        if piece is not None:
            outputs.append(_render(state, request_id, [piece]))
    elif chunk.usage is not None and _wants_usage(state):
        # A usage-only event: the engine's final count, with the request's prompt size.
        prompt = state.prompt_tokens
        if prompt is None:
            prompt = chunk.usage.prompt_tokens or 0
        completion = chunk.usage.completion_tokens
        if completion is None:
            completion = _completion_tokens(state)
        outputs.append(_usage_chunk(state, request_id, usage(prompt, completion)))
        state.usage_sent = True
    return outputs


def _positions(
    state: RequestState, logprobs: Logprobs | None, ids: list[int], index: int, model: Model
) -> list[Position] | None:
    """Check a choice's logprobs (always, before any tokenizer work) and return the
    positions to show: when the request asked for logprobs, or when there was no
    request (then the engine decides, untrimmed); never for a prompt-only echo."""
    opts = state.opts
    keep = (opts.logprobs or opts.no_request) and not opts.hide_output
    limit = top_limit(state.api, opts.no_request, opts.top_logprobs)
    return parse_generate(logprobs, ids, model.vocab_size, index, limit, keep)


def _wants_usage(state: RequestState) -> bool:
    """One final usage chunk when the request asked for it; with no request at all,
    the engine's usage events are forwarded as vLLM's derender does."""
    return (state.opts.include_usage or state.opts.no_request) and not state.usage_sent


def _new_choice(state: RequestState, index: int) -> ChoiceState:
    cs = ChoiceState(index=index, window=list(state.seed), text_offset=state.opts.echo_len)
    if state.parser is not None:
        cs.parser = for_choice(state.parser, index)
    state.choices.append(cs)
    state.choices.sort(key=lambda c: c.index)
    return cs


def _advance(
    state: RequestState, choice: StreamChoice, positions: list[Position] | None, model: Model
) -> _Piece | None:
    """Detokenize one choice's new ids, apply stops, resolve logprobs; None when there
    is nothing to say."""
    cs = state.choice(choice.index) or _new_choice(state, choice.index)
    ids = choice.token_ids or []
    cs.tokens += len(ids)
    if cs.done:
        return None  # a stop string already ended this choice: later tokens are hidden
    finish = choice.finish_reason
    stop_reason = choice.stop_reason
    emit = ""
    logprobs: LogprobsOut | None = None
    delta: out.Delta | None = None
    if not state.opts.hide_output:  # prompt-only echo shows no generated token
        emit, finish, stop_reason, resolved, text_ids = _decode(
            state, cs, ids, finish, stop_reason, model, finish is not None, positions
        )
        if cs.parser is not None:
            fed = feed(model.parser, cs.parser, emit, text_ids, final=finish is not None)
            delta = to_delta(fed.events, model.reasoning_field)
            emit = ""  # the text is in the delta, split (markers never show)
            resolved = _unhidden(resolved, fed.hidden)
            if finish is not None:
                finish = finish_reason(cs.parser, finish)
        if resolved:
            if state.api == "chat":
                logprobs = chat_logprobs(resolved)
            else:
                logprobs, cs.text_offset = completion_logprobs(resolved, cs.text_offset)
    if finish is not None:
        cs.done = True
        cs.window, cs.pending = [], []  # nothing more to decode: keep the state small
    piece = _Piece(choice.index, emit, not cs.role_sent, finish, stop_reason, logprobs, delta)
    cs.role_sent = True
    says = piece.delta is not None or bool(piece.text)
    if not says and not piece.role and piece.finish_reason is None and logprobs is None:
        return None
    return piece


def _unhidden(resolved: list[Resolved] | None, hidden: list[bool] | None) -> list[Resolved] | None:
    """`include_reasoning: false` hides the reasoning and the logprobs of its tokens."""
    if not resolved or not hidden:
        return resolved
    kept = [r for k, r in enumerate(resolved) if not (k < len(hidden) and hidden[k])]
    return kept or None


def _token_stop(
    ids: list[int],
    finish: str | None,
    stop_reason: int | str | None,
    opts: Options,
    model: Model,
) -> tuple[list[int], int | str | None]:
    """A stop token ends the text: drop it unless asked to keep it (PY-STOP rule).

    Only on `finish_reason == "stop"` with the stop token last, and not when the engine's
    integer `stop_reason` names another token (vLLM 0.33); the primary EOS leaves
    `stop_reason` as the engine sent it, other stop tokens name themselves.
    """
    if finish != FINISH_STOP or not ids:
        return ids, stop_reason
    last = ids[-1]
    if isinstance(stop_reason, int) and stop_reason != last:
        return ids, stop_reason  # the engine names another stop token: this one is text
    primary_eos = model.eos_token_ids[0] if model.eos_token_ids else None
    is_stop = last in opts.stop_token_ids or last in model.eos_token_ids or last == stop_reason
    if not is_stop:
        return ids, stop_reason
    if stop_reason is None and last != primary_eos:
        stop_reason = last
    if opts.include_stop_str_in_output:
        return ids, stop_reason
    return ids[:-1], stop_reason


def _completion_tokens(state: RequestState) -> int:
    return sum(c.tokens for c in state.choices)


def _render(state: RequestState, request_id: str, pieces: list[_Piece]) -> Output:
    u = (
        usage(state.prompt_tokens or 0, _completion_tokens(state))
        if state.opts.continuous_usage_stats
        else UNSET
    )
    body: out.ChatCompletionChunk | out.CompletionChunk
    if state.api == "chat":
        body = out.ChatCompletionChunk(
            id=request_id,
            object="chat.completion.chunk",
            created=state.created,
            model=state.model,
            choices=[
                out.ChatChunkChoice(
                    index=p.index,
                    delta=_delta(p),
                    logprobs=p.logprobs if isinstance(p.logprobs, out.ChatLogprobs) else None,
                    finish_reason=p.finish_reason,
                    stop_reason=p.stop_reason,
                )
                for p in pieces
            ],
            usage=u,
        )
    else:
        body = out.CompletionChunk(
            id=request_id,
            object="text_completion",
            created=state.created,
            model=state.model,
            choices=[
                out.CompletionChunkChoice(
                    index=p.index,
                    text=p.text,
                    logprobs=(
                        p.logprobs if isinstance(p.logprobs, out.CompletionLogprobs) else None
                    ),
                    finish_reason=p.finish_reason,
                    stop_reason=p.stop_reason,
                )
                for p in pieces
            ],
            usage=u,
        )
    return Output(CHUNK, out.encode(body))


def _delta(p: _Piece) -> out.Delta:
    if p.delta is not None:  # the parser's split of this record
        delta = p.delta
        if p.role:
            delta.role = ROLE
            if delta.content is UNSET and delta.tool_calls is UNSET:
                delta.content = ""  # OpenAI's first chunk: role with an empty content
        return delta
    return out.Delta(
        role=ROLE if p.role else UNSET,
        # A record whose tokens only held text back still carries their logprobs (or
        # is the role's first chunk); its delta says so with an empty content.
        content=p.text if (p.text or p.role or p.logprobs) else UNSET,
    )


def _usage_chunk(state: RequestState, request_id: str, u: out.UsageInfo) -> Output:
    body: out.ChatCompletionChunk | out.CompletionChunk
    if state.api == "chat":
        body = out.ChatCompletionChunk(
            request_id, "chat.completion.chunk", state.created, state.model, [], u
        )
    else:
        body = out.CompletionChunk(request_id, "text_completion", state.created, state.model, [], u)
    return Output(CHUNK, out.encode(body))


def _on_end(state: RequestState, request_id: str, model: Model, abort: bool) -> list[Output]:
    """`end`: flush what is held, usage if asked, `[DONE]`. `abort`: the same, but every
    unfinished choice gets `finish_reason: "abort"` (choices never seen included)."""
    opts = state.opts
    detok = model.detokenizer(opts.skip_special_tokens)
    if abort:
        for index in range(opts.n):
            if state.choice(index) is None:
                _new_choice(state, index)
    pieces: list[_Piece] = []
    for cs in state.choices:
        if cs.done:
            continue
        text = cs.held + detok.flush(cs)
        cs.held = ""
        cs.done = True
        piece = _Piece(cs.index, text, not cs.role_sent, FINISH_ABORT if abort else None)
        if cs.parser is not None:  # release what the parser holds (a partial marker)
            fed = feed(model.parser, cs.parser, text, None, True)
            piece.delta = to_delta(fed.events, model.reasoning_field)
            piece.text = ""
        cs.role_sent = True
        if piece.text or piece.delta or piece.role or piece.finish_reason is not None:
            pieces.append(piece)
    outputs = [_render(state, request_id, [p]) for p in pieces]
    if opts.include_usage and not state.usage_sent:
        outputs.append(
            _usage_chunk(
                state, request_id, usage(state.prompt_tokens or 0, _completion_tokens(state))
            )
        )
        state.usage_sent = True
    outputs.append(_DONE)
    state.status = DONE
    return outputs


# -- echo (completion) ----------------------------------------------------------------


def _echo_chunks(state: RequestState, record: ChunkRecord, model: Model) -> list[Output]:
    """A streamed completion with `echo`: the prompt text, first on every choice.

    Sent with the seq-0 record, one chunk per choice index (each choice's first text,
    as vLLM sends it, though vLLM glues it to the first generated text). The prompt is
    not kept in the state; only its length, where completion logprob offsets start.
    """
    prompt_ids = record.prompt_token_ids
    if prompt_ids is None and record.generate_chunk is not None:
        prompt_ids = record.generate_chunk.prompt_token_ids
    text = _prompt_text(state, _request(record, state.api), prompt_ids, 0, 1, model)
    state.opts.echo_len = len(text)
    if not text:
        return []
    return [_render(state, record.request_id, [_Piece(i, text)]) for i in range(state.opts.n)]


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


def _prompt_text(
    state: RequestState,
    req: ChatRequest | None,
    prompt_ids: list[int] | None,
    i: int,
    n: int,
    model: Model,
) -> str:
    """The echoed prompt: the request's string prompt, else its token ids decoded (the
    request's token-id prompt, else the rendered `prompt_token_ids`)."""
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
    _check_ids(ids, model, "prompt")
    return model.detokenizer(state.opts.skip_special_tokens).decode(ids)


def _prompt_ids(
    req: ChatRequest | None, prompt_ids: list[int] | None, i: int, n: int, model: Model
) -> list[int]:
    """The prompt's token ids, for its logprobs: as rendered, else the request's
    token-id prompt, else its string prompt encoded (with special tokens, as rendered)."""
    if prompt_ids is not None:
        return prompt_ids
    prompt = _pick_prompt(req.prompt if req is not None else None, i, n)
    if isinstance(prompt, list):
        _check_ids(prompt, model, "prompt")
        return prompt
    if prompt is None:
        raise DerenderError(
            "echo with prompt_logprobs needs the prompt's token ids", param="prompt"
        )
    ids = list(model.tokenizer.encode(prompt, add_special_tokens=True).ids)
    _check_ids(ids, model, "prompt")
    return ids


# -- whole responses ------------------------------------------------------------------


def _responses(record: ChunkRecord, api: str) -> list[GenerateResponse]:
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
    if api == "chat" and len(many) > 1:
        raise DerenderError(
            f"a chat response takes one generate output; got {len(many)} generate_responses",
            param="generate_responses",
        )
    if len(many) > MAX_N_SEQUENCES:
        raise DerenderError(
            f"generate_responses count ({len(many)}) exceeds the maximum ({MAX_N_SEQUENCES}).",
            param="generate_responses",
        )
    return many


def _check_response(
    state: RequestState, resp: GenerateResponse, model: Model
) -> list[tuple[ResponseChoice, list[Position] | None]]:
    """Bounds and payload checks of one generate output, before any tokenizer work."""
    if len(resp.choices) > MAX_N_SEQUENCES:
        raise DerenderError(
            f"choices count ({len(resp.choices)}) in response '{resp.request_id}' exceeds "
            f"the maximum ({MAX_N_SEQUENCES}).",
            param="choices",
        )
    if resp.prompt_token_ids is not None:
        _check_ids(resp.prompt_token_ids, model, "prompt_token_ids")
    if resp.prompt_logprobs is not None and len(resp.prompt_logprobs) > model.max_model_len:
        raise DerenderError(
            f"prompt_logprobs length ({len(resp.prompt_logprobs)}) in response "
            f"'{resp.request_id}' exceeds max_model_len ({model.max_model_len}).",
            param="prompt_logprobs",
        )
    checked = []
    for choice in resp.choices:
        if not choice.token_ids:
            raise DerenderError(
                f"choice {choice.index} has empty or null token_ids", param="token_ids"
            )
        _check_ids(choice.token_ids, model, "token_ids")
        _check_logprobs(choice.logprobs, choice.index, model)
        positions = _positions(state, choice.logprobs, choice.token_ids, choice.index, model)
        checked.append((choice, positions))
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


def _on_response(state: RequestState, record: ChunkRecord, model: Model) -> list[Output]:
    """Whole generate output(s) → one non-streaming `chat.completion` / `text_completion`.

    Each choice runs through the same detokenize, stop and logprob path as streaming,
    in one piece, so both paths give the same text and logprobs for the same tokens.
    """
    responses = _responses(record, state.api)
    checked = [_check_response(state, resp, model) for resp in responses]
    opts = state.opts
    chat = state.api == "chat"
    single = len(responses) == 1
    if state.prompt_tokens is None:  # not on the record: once per generate output
        state.prompt_tokens = sum(_prompt_count(r) for r in responses)
    detok = model.detokenizer(opts.skip_special_tokens)
    # Prompt logprobs are shown only spliced into an echoed completion (chat passes the
    # engine's `prompt_logprobs` through unresolved, as vLLM does).
    want_prompt_lp = (opts.logprobs or opts.no_request) and opts.echo
    limit = top_limit(state.api, opts.no_request, opts.top_logprobs)
    completion = 0
    chat_choices: list[out.ChatChoice] = []
    completion_choices: list[out.CompletionChunkChoice] = []
    for i, (resp, choices) in enumerate(zip(responses, checked, strict=True)):
        seed = state.seed
        if resp.prompt_token_ids and not (single and seed):
            seed = detok.seed(resp.prompt_token_ids)
        own_prompt_ids = resp.prompt_token_ids
        if own_prompt_ids is None and single:
            own_prompt_ids = record.prompt_token_ids
        echo_text = ""
        prompt_lp: list[Resolved] | None = None
        if opts.echo:
            echo_text = _prompt_text(
                state, _request(record, state.api), own_prompt_ids, i, len(responses), model
            )
            if want_prompt_lp and resp.prompt_logprobs is not None:
                pids = _prompt_ids(
                    _request(record, state.api), own_prompt_ids, i, len(responses), model
                )
                prompt_pos = parse_prompt(resp.prompt_logprobs, pids, model.vocab_size, limit)
                prompt_lp = model.resolver().resolve(prompt_pos, [], [], final=False)
        for choice, positions in choices:
            ids = choice.token_ids or []
            completion += len(ids)
            cs = ChoiceState(index=choice.index, window=list(seed))
            text, finish, stop_reason = "", choice.finish_reason, choice.stop_reason
            resolved: list[Resolved] | None = None
            text_ids: list[int] = []
            if not opts.hide_output:
                text, finish, stop_reason, resolved, text_ids = _decode(
                    state, cs, ids, finish, stop_reason, model, True, positions
                )
            if chat:
                message = out.ChatMessage(role=ROLE, content=text)
                if state.parser is not None:  # the streaming engine, fed once
                    pst = for_choice(state.parser, choice.index)
                    parsed = parse_whole(model.parser, pst, text, text_ids)
                    message = to_message(parsed, model.reasoning_field)
                    resolved = _unhidden(resolved, parsed.hidden)
                    finish = finish_reason(pst, finish)
                lp = chat_logprobs(resolved) if resolved is not None else None
                chat_choices.append(out.ChatChoice(choice.index, message, lp, finish, stop_reason))
                continue
            clp: out.CompletionLogprobs | None = None
            if prompt_lp is not None and (opts.hide_output or resolved is not None):
                # Prompt logprobs first, then the generated tokens' (offsets continue).
                clp, _ = completion_logprobs(prompt_lp + (resolved or []), 0)
            elif resolved is not None:
                clp, _ = completion_logprobs(resolved, len(echo_text))
            # Completion re-indexes choices in arrival order; chat keeps the engine's index.
            completion_choices.append(
                out.CompletionChunkChoice(
                    len(completion_choices), echo_text + text, clp, finish, stop_reason
                )
            )
    u = usage(state.prompt_tokens, completion)
    body: out.ChatCompletion | out.Completion
    if chat:
        body = out.ChatCompletion(
            id=record.request_id,
            object="chat.completion",
            created=state.created,
            model=state.model,
            choices=chat_choices,
            usage=u,
            prompt_logprobs=responses[0].prompt_logprobs,
            kv_transfer_params=responses[0].kv_transfer_params,
            metrics=UNSET if responses[0].metrics is None else responses[0].metrics,
        )
    else:
        metrics = _agreed([r.metrics for r in responses])
        body = out.Completion(
            id=record.request_id,
            object="text_completion",
            created=state.created,
            model=state.model,
            choices=completion_choices,
            usage=u,
            kv_transfer_params=_agreed([r.kv_transfer_params for r in responses]),
            metrics=UNSET if metrics is None else metrics,
        )
    state.status = DONE
    return [Output(RESPONSE, out.encode(body))]


# -- shared by streaming and whole responses ------------------------------------------


def _decode(
    state: RequestState,
    cs: ChoiceState,
    ids: list[int],
    finish: str | None,
    stop_reason: int | str | None,
    model: Model,
    final: bool,
    positions: list[Position] | None,
) -> tuple[str, str | None, int | str | None, list[Resolved] | None, list[int]]:
    """Token stop → detokenize → stop strings → logprobs, for one choice; the streaming
    and the whole-response paths share it so they cannot disagree.

    Returns the text to emit, the (possibly stop-rewritten) finish and stop reasons,
    the resolved logprob positions (None when there are none to show) and the ids the
    text comes from (a dropped stop token removed), for the parser.

    Logprobs of tokens wholly after a stop string are not shown: the coupled server
    stops generating at the token that completes the stop string, so those tokens
    never exist there. A dropped stop token keeps its logprob: it was generated.
    """
    opts = state.opts
    detok: Detokenizer = model.detokenizer(opts.skip_special_tokens)
    # The decoder state before these ids is where their logprob texts start from (the
    # lists are replaced, never changed in place, so keeping them is enough).
    window, pending, held = cs.window, cs.pending, cs.held
    text_ids, stop_reason = _token_stop(ids, finish, stop_reason, opts, model)
    text = detok.step(cs, text_ids)
    if final:
        text += detok.flush(cs)
    emit, cs.held, fired = apply_stop(
        cs.held, text, opts.stop, opts.include_stop_str_in_output, final
    )
    if fired is not None:
        finish, stop_reason = FINISH_STOP, fired
    if not positions:
        return emit, finish, stop_reason, None, text_ids
    shown = len(positions)
    if fired is not None:
        shown = _tokens_through_stop(detok, cs.index, window, pending, held, text_ids, opts, final)
    resolved = model.resolver().resolve(
        positions[:shown], window, pending, final and shown == len(positions)
    )
    return emit, finish, stop_reason, resolved, text_ids


def _tokens_through_stop(
    detok: Detokenizer,
    index: int,
    window: list[int],
    pending: list[int],
    held: str,
    ids: list[int],
    opts: Options,
    final: bool,
) -> int:
    """How many of `ids` it takes for the stop string to fire: replays them one at a
    time from the state before the record. Runs once per choice, when a stop fires."""
    slot = ChoiceState(index, window=window, pending=pending)
    last = len(ids) - 1
    for i, tid in enumerate(ids):
        ends = final and i == last
        text = detok.step(slot, [tid])
        if ends:
            text += detok.flush(slot)
        _, held, fired = apply_stop(held, text, opts.stop, opts.include_stop_str_in_output, ends)
        if fired is not None:
            return i + 1
    return len(ids)  # not reached: the same text fires on the same ids
