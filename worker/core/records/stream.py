"""Streaming: a `chunk` record → at most one chunk output; `end` / `abort` → the stream's end.

A chunk carries one choice's new token ids (choices of `n > 1` interleave, one per
record). Each is advanced through `decode_choice` and, on the parser path, the
reasoning / tool-call parser, then rendered as one `chat.completion.chunk` or
`text_completion` chunk. `end` flushes what is held, sends usage if asked and `[DONE]`.
"""

from __future__ import annotations

from worker.constants import CHUNK
from worker.core import apis, render
from worker.core.bounds import check_chunk
from worker.core.errors import DerenderError
from worker.core.model import Model
from worker.core.parsers import for_choice
from worker.core.parsers.quick import MISS, Miss
from worker.core.records.engine_metrics import full_metrics
from worker.core.render import LogprobsOut, Output, Piece
from worker.core.state import DONE, ChoiceState, RequestState
from worker.core.tables import Tables
from worker.core.text.decode import FINISH_ABORT, decode_choice, flushed, shown_positions, unhidden
from worker.core.text.logprobs import Position, chat_logprobs, completion_logprobs
from worker.core.usage import completion_tokens, request_usage, usage
from worker.wire import outbound as out
from worker.wire.inbound import GenerateStreamResponse, StreamChoice


def on_chunk(
    state: RequestState,
    request_id: str,
    chunk: GenerateStreamResponse | None,
    model: Model,
    tables: Tables,
) -> list[Output]:
    if chunk is None:
        raise DerenderError("a `chunk` record needs `generate_chunk`", param="generate_chunk")
    check_chunk(chunk, model)
    # (The calls below are skipped where they would return at once: this runs once per
    # streamed record, and a Python call costs more than the test.)
    metrics = None
    if chunk.metrics is not None:
        metrics = full_metrics(chunk.metrics, "generate_chunk.metrics")
    # A usage-only event opens nothing (vLLM's chat server opens at the first output;
    # serve's clients send usage events without a choice's stream_state).
    outputs = _opening(state, request_id) if chunk.choices and not state.opened else []
    if chunk.choices:
        choice = chunk.choices[0]
        positions = None
        if choice.logprobs is not None:  # (none: no positions, nothing to check)
            ids = choice.token_ids or []
            positions = shown_positions(state, choice.logprobs, ids, choice.index, model)
        piece = _advance(state, choice, positions, model, tables)
        if state.fmt is not None:  # Responses, Messages: the format's events
            outputs += apis.on_piece(state, request_id, piece)
        elif piece is not None:
            outputs.append(render.chunk(state, request_id, [piece], metrics))
    elif chunk.usage is not None and _wants_usage(state):
        # A usage-only event: the engine's final count, with the request's prompt size.
        prompt = state.prompt_tokens
        if prompt is None:
            prompt = chunk.usage.prompt_tokens or 0
        completion = chunk.usage.completion_tokens
        if completion is None:
            completion = completion_tokens(state)
        outputs.append(render.usage_chunk(state, request_id, usage(prompt, completion), metrics))
        state.usage_sent = True
    return outputs


def streamed(
    state: RequestState,
    request_id: str,
    chunk: GenerateStreamResponse,
    model: Model,
    tables: Tables,
) -> list[Output] | None:
    """`on_chunk` of the streamed record, in one frame; None (and `state` untouched)
    for any other record, which `on_chunk` then takes.

    The record nearly every batch is made of: an opened chat stream's one choice, its
    role sent, ids whose texts the detokenizer knows with nothing pending, not the
    last, no logprobs, stop reason, metrics, stop strings or usage per chunk. The
    general path spends seven Python calls on it (check_chunk → _advance →
    decode_choice → Detokenizer.step → _whole, render.chunk), two Structs (`Decoded`,
    `Piece`) and the whole body's encoding; this reads every condition first, then does
    what they do for such a record, and encodes only the delta (`render.chat_head`):
    the same outputs and the same state, byte for byte (tests/core/test_streamed.py
    feeds records both ways).
    """
    choices = chunk.choices
    if len(choices) == 1 and chunk.metrics is None and state.opened and state.api == "chat":
        choice = choices[0]
        ids = choice.token_ids
        cstates = state.choices
        opts = state.opts
        if (
            ids  # (none: nothing to decode, and the usage-only event)
            and choice.finish_reason is None
            and choice.logprobs is None
            and choice.stop_reason is None
            and len(cstates) == 1
            and not tables.stopping
            and not opts.continuous_usage_stats
            and not opts.hide_output
        ):
            cs = cstates[0]
            memo = model.detokenizers[opts.skip_special_tokens].memo
            count = len(ids)
            # The text of ids whose texts the memo knows, and check_chunk's bounds: the
            # ids of Detokenizer._whole (its other ids take the general path, which
            # learns them).
            text: str | None
            if count == 1:
                tid = ids[0]
                text = memo.get(tid) if 0 <= tid < model.vocab_size else None
            elif min(ids) >= 0 and max(ids) < model.vocab_size:
                parts = []
                for tid in ids:
                    part = memo.get(tid)
                    if part is None:
                        break
                    parts.append(part)
                text = "".join(parts) if len(parts) == count else None
            else:
                text = None
            if (
                text is not None
                and count <= model.max_model_len
                and cs.index == choice.index
                and cs.role_sent
                and not cs.done
                and not cs.pending
            ):
                cs.tokens += count
                if cs.held:  # (no stop strings: what a stop string held goes out now)
                    text, cs.held = cs.held + text, ""
                delta: out.Delta | Miss | None
                parser_state = cs.parser
                if parser_state is not None:
                    quick = model.parser.quick
                    delta = MISS if quick is None else quick.delta(parser_state, text, ids)
                    if delta is MISS:
                        delta = model.parser.engine(
                            parser_state, text, ids, False, tables.tools
                        ).delta
                    if delta is None:
                        return []
                elif text:
                    delta = out.Delta(content=text)
                else:
                    return []
                # The body's JSON around the delta, as render.chunk would encode it.
                head = render.HEADS.get(request_id)
                if (
                    head is None
                    or head[0] != state.created
                    or head[1] != state.model
                    or head[2] != cs.index
                ):
                    head = render.chat_head(request_id, state.created, state.model, cs.index)
                return [Output(CHUNK, head[3] + out.encode(delta) + head[4])]
    return None


def on_end(
    state: RequestState, request_id: str, model: Model, tables: Tables, abort: bool
) -> list[Output]:
    """`end`: flush what is held, usage if asked, `[DONE]`. `abort`: the same, but every
    unfinished choice gets `finish_reason: "abort"` (choices never seen included)."""
    opts = state.opts
    detok = model.detokenizer(opts.skip_special_tokens)
    opening = _opening(state, request_id)
    if abort:
        for index in range(opts.n):
            if state.choice(index) is None:
                _new_choice(state, index)
    pieces: list[Piece] = []
    for cs in state.choices:
        if cs.done:
            continue
        text = cs.held + flushed(detok, cs, FINISH_ABORT if abort else None)
        cs.held = ""
        cs.done = True
        piece = Piece(cs.index, text, not cs.role_sent, FINISH_ABORT if abort else None)
        if cs.parser is not None:  # release what the parser holds (a partial marker)
            fed = model.parser.feed(cs.parser, text, None, True, tables.tools)
            piece.delta, piece.events = fed.delta, fed.events
            piece.text = ""
        cs.role_sent = True
        if piece.text or piece.delta or piece.role or piece.finish_reason is not None:
            pieces.append(piece)
    if state.fmt is not None:  # Responses, Messages: the format's closing events
        state.status = DONE
        return apis.on_end(state, request_id, pieces, request_usage(state), abort)
    outputs = opening + [render.chunk(state, request_id, [p]) for p in pieces]
    if opts.include_usage and not state.usage_sent:
        outputs.append(render.usage_chunk(state, request_id, request_usage(state)))
        state.usage_sent = True
    outputs.append(render.DONE)
    state.status = DONE
    return outputs


def _wants_usage(state: RequestState) -> bool:
    """One final usage chunk when the request asked for it; with no request at all,
    the engine's usage events are forwarded as vLLM's derender does."""
    return (state.opts.include_usage or state.opts.no_request) and not state.usage_sent


def _opening(state: RequestState, request_id: str) -> list[Output]:
    """A chat stream opens as vLLM's chat server opens it: one role chunk per choice,
    indices 0…n−1 in order, before any output; later deltas carry no role. Clients
    (the official SDKs) index choices by position: a stream whose first chunk is
    choice 1's breaks them. Once per request, at its first chunk with a choice, or its
    `end` / `abort`."""
    if state.api != "chat" or state.opened or any(c.role_sent for c in state.choices):
        return []
    state.opened = True
    return [render.opening(state, request_id, index) for index in range(state.opts.n)]


def _new_choice(state: RequestState, index: int) -> ChoiceState:
    cs = ChoiceState(index=index, window=list(state.seed), text_offset=state.opts.echo_len)
    # The opening sent the role of every choice the request asked for; an index beyond
    # them (the engine's, not the request's) gets its role with its first delta.
    cs.role_sent = state.opened and index < state.opts.n
    if state.parser is not None:
        cs.parser = for_choice(state.parser, index)
    state.choices.append(cs)
    state.choices.sort(key=lambda c: c.index)
    return cs


def _advance(
    state: RequestState,
    choice: StreamChoice,
    positions: list[Position] | None,
    model: Model,
    tables: Tables,
) -> Piece | None:
    """Detokenize one choice's new ids, apply stops, resolve logprobs; None when there
    is nothing to say."""
    index = choice.index
    choices = state.choices  # (n = 1, the usual request: its one choice, without a call)
    cs = choices[0] if len(choices) == 1 and choices[0].index == index else state.choice(index)
    if cs is None:
        cs = _new_choice(state, index)
    ids = choice.token_ids or []
    cs.tokens += len(ids)
    if cs.done:
        return None  # a stop string already ended this choice: later tokens are hidden
    finish = choice.finish_reason
    stop_reason = choice.stop_reason
    emit = ""
    logprobs: LogprobsOut | None = None
    delta: out.Delta | None = None
    events = None  # (Responses, Messages: the parser's events in order)
    if not state.opts.hide_output:  # prompt-only echo shows no generated token
        final = finish is not None
        d = decode_choice(state, cs, ids, finish, stop_reason, model, tables, final, positions)
        emit, finish, stop_reason, resolved = d.text, d.finish_reason, d.stop_reason, d.logprobs
        if cs.parser is not None:
            # (Parser.feed, its two paths called here: a call less on every record.)
            parser, quick = model.parser, model.parser.quick
            said: out.Delta | Miss | None = MISS
            if quick is not None and finish is None:
                said = quick.delta(cs.parser, emit, d.text_ids)
            if said is MISS:
                parsed = parser.engine(
                    cs.parser, emit, d.text_ids, finish is not None, tables.tools
                )
                delta, hidden = parsed.delta, parsed.hidden
                if state.fmt is not None:
                    events = parsed.events
            else:
                delta, hidden = said, None
            emit = ""  # the text is in the delta, split (markers never show)
            if resolved:
                resolved = unhidden(resolved, hidden)
            if finish is not None:
                finish = model.parser.finish(cs.parser, finish)
        if resolved:
            if state.api != "completion":
                logprobs = chat_logprobs(resolved)
            else:
                logprobs, cs.text_offset = completion_logprobs(resolved, cs.text_offset)
    if finish is not None:
        cs.done = True
        cs.window, cs.pending = [], []  # nothing more to decode: keep the state small
    role = not cs.role_sent
    cs.role_sent = True
    if delta is None and not emit and not role and finish is None and logprobs is None:
        return None  # nothing to say
    return Piece(choice.index, emit, role, finish, stop_reason, logprobs, delta, events)
