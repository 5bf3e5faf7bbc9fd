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

from msgspec import UNSET

from worker.core import errors
from worker.core.detokenize import Detokenizer
from worker.core.errors import DerenderError
from worker.core.model import Model, Registry
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

ROLE = "assistant"
FINISH_ABORT = "abort"
FINISH_STOP = "stop"


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
        if state is None:
            state = _open(record, registry, timestamp_ms)
        else:
            state.seq = record.seq
        model = registry.resolve(state.model)
        if model is None:  # the registry changed under a live request
            raise DerenderError(
                f"The model `{state.model}` does not exist.", errors.MODEL_NOT_FOUND, "model"
            )
        # 3) + 4) The payload.
        if record.type == "chunk":
            outputs = _on_chunk(state, record.request_id, record.generate_chunk, model)
        elif record.type == "response":
            outputs = _on_response(state, record.request_id, record.generate_response, model)
        elif record.type == "end":
            outputs = _on_end(state, record.request_id, model, abort=False)
        else:
            outputs = _on_end(state, record.request_id, model, abort=True)
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
    req = record.chat_request if api == "chat" else record.completion_request
    if req is None:  # the other flavour's request is still the request
        req = record.completion_request if api == "chat" else record.chat_request
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
    state.seed = model.detokenizer(opts.skip_special_tokens).seed(prompt_ids)
    return state


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
    if req.n < 1:
        raise DerenderError(f"n must be at least 1, got {req.n}", param="n")
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


@dataclass(slots=True)
class _Piece:
    """What one record contributes to one choice, before rendering."""

    index: int
    text: str = ""
    role: bool = False
    finish_reason: str | None = None
    stop_reason: int | str | None = None


def _on_chunk(
    state: RequestState, request_id: str, chunk: GenerateStreamResponse | None, model: Model
) -> list[Output]:
    if chunk is None:
        raise DerenderError("a `chunk` record needs `generate_chunk`", param="generate_chunk")
    _check_chunk(chunk, model)
    outputs: list[Output] = []
    if chunk.choices:
        piece = _advance(state, chunk.choices[0], model)
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


def _wants_usage(state: RequestState) -> bool:
    """One final usage chunk when the request asked for it; with no request at all,
    the engine's usage events are forwarded as vLLM's derender does."""
    return (state.opts.include_usage or state.opts.no_request) and not state.usage_sent


def _new_choice(state: RequestState, index: int) -> ChoiceState:
    cs = ChoiceState(index=index, window=list(state.seed))
    state.choices.append(cs)
    state.choices.sort(key=lambda c: c.index)
    return cs


def _advance(state: RequestState, choice: StreamChoice, model: Model) -> _Piece | None:
    """Detokenize one choice's new ids, apply stops; None when there is nothing to say."""
    cs = state.choice(choice.index) or _new_choice(state, choice.index)
    ids = choice.token_ids or []
    cs.tokens += len(ids)
    if cs.done:
        return None  # a stop string already ended this choice
    finish = choice.finish_reason
    emit, finish, stop_reason = _decode(
        state, cs, ids, finish, choice.stop_reason, model, final=finish is not None
    )
    if finish is not None:
        cs.done = True
        cs.window, cs.pending = [], []  # nothing more to decode: keep the state small
    piece = _Piece(choice.index, emit, not cs.role_sent, finish, stop_reason)
    cs.role_sent = True
    if not piece.text and not piece.role and piece.finish_reason is None:
        return None
    return piece


def _token_stop(
    ids: list[int],
    finish: str | None,
    stop_reason: int | str | None,
    opts: Options,
    model: Model,
) -> tuple[list[int], int | str | None]:
    """A stop token ends the text: drop it unless asked to keep it (PY-STOP rule).

    Only on `finish_reason == "stop"` with the stop token last; the primary EOS leaves
    `stop_reason` as the engine sent it, other stop tokens name themselves.
    """
    if finish != FINISH_STOP or not ids:
        return ids, stop_reason
    last = ids[-1]
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
                    delta=out.Delta(
                        role=ROLE if p.role else UNSET,
                        content=p.text if (p.text or p.role) else UNSET,
                    ),
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
                    finish_reason=p.finish_reason,
                    stop_reason=p.stop_reason,
                )
                for p in pieces
            ],
            usage=u,
        )
    return Output(CHUNK, out.encode(body))


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
        cs.role_sent = True
        if piece.text or piece.role or piece.finish_reason is not None:
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


def _on_response(
    state: RequestState, request_id: str, resp: GenerateResponse | None, model: Model
) -> list[Output]:
    """A whole generate output → one non-streaming `chat.completion` / `text_completion`.

    Each choice runs through the same detokenize-and-stop path as streaming, in one
    piece, so both paths give the same text for the same tokens.
    """
    if resp is None:
        raise DerenderError(
            "a `response` record needs `generate_response`", param="generate_response"
        )
    for choice in resp.choices:
        if not choice.token_ids:
            raise DerenderError(
                f"choice {choice.index} has empty or null token_ids", param="token_ids"
            )
        _check_ids(choice.token_ids, model, "token_ids")
        _check_logprobs(choice.logprobs, choice.index, model)
    if state.prompt_tokens is None and resp.prompt_token_ids is not None:
        state.prompt_tokens = len(resp.prompt_token_ids)
    if not state.seed and resp.prompt_token_ids:
        _check_ids(resp.prompt_token_ids, model, "prompt_token_ids")
        state.seed = model.detokenizer(state.opts.skip_special_tokens).seed(resp.prompt_token_ids)
    texts: list[tuple[int, str, str | None, int | str | None]] = []
    completion = 0
    for i, choice in enumerate(resp.choices):
        ids = choice.token_ids or []
        completion += len(ids)
        cs = ChoiceState(index=choice.index, window=list(state.seed))
        text, fin, sr = _decode(
            state, cs, ids, choice.finish_reason, choice.stop_reason, model, final=True
        )
        # Completion re-indexes choices in arrival order; chat keeps the engine's index.
        texts.append((choice.index if state.api == "chat" else i, text, fin, sr))
    u = usage(state.prompt_tokens or 0, completion)
    body: out.ChatCompletion | out.Completion
    if state.api == "chat":
        body = out.ChatCompletion(
            id=request_id,
            object="chat.completion",
            created=state.created,
            model=state.model,
            choices=[
                out.ChatChoice(index, out.ChatMessage(role=ROLE, content=text), None, fin, sr)
                for index, text, fin, sr in texts
            ],
            usage=u,
            prompt_logprobs=resp.prompt_logprobs,
            kv_transfer_params=resp.kv_transfer_params,
        )
    else:
        body = out.Completion(
            id=request_id,
            object="text_completion",
            created=state.created,
            model=state.model,
            choices=[
                out.CompletionChunkChoice(index, text, None, fin, sr)
                for index, text, fin, sr in texts
            ],
            usage=u,
            kv_transfer_params=resp.kv_transfer_params,
        )
    state.status = DONE
    return [Output(RESPONSE, out.encode(body))]


def _decode(
    state: RequestState,
    cs: ChoiceState,
    ids: list[int],
    finish: str | None,
    stop_reason: int | str | None,
    model: Model,
    final: bool,
) -> tuple[str, str | None, int | str | None]:
    """Token stop → detokenize → stop strings, for one choice; the streaming and the
    whole-response paths share it so they cannot disagree on text.

    Returns the text to emit and the (possibly stop-rewritten) finish and stop reasons.
    """
    opts = state.opts
    detok: Detokenizer = model.detokenizer(opts.skip_special_tokens)
    ids, stop_reason = _token_stop(ids, finish, stop_reason, opts, model)
    text = detok.step(cs, ids)
    if final:
        text += detok.flush(cs)
    emit, cs.held, fired = apply_stop(
        cs.held, text, opts.stop, opts.include_stop_str_in_output, final
    )
    if fired is not None:
        finish, stop_reason = FINISH_STOP, fired
    return emit, finish, stop_reason
