"""One choice's new tokens → text, finish and logprobs; streaming and whole responses share it.

The order is: a stop token ends the text → detokenize → stop strings → logprobs of the
tokens shown. Both payload paths call `decode_choice`, so a stream and a whole response
of the same tokens cannot disagree.
"""

from __future__ import annotations

import msgspec

from worker.core.model import Model
from worker.core.state import ChoiceState, Options, RequestState
from worker.core.tables import Tables
from worker.core.text.detokenize import Detokenizer
from worker.core.text.logprobs import Position, Resolved, parse_generate, top_limit
from worker.core.text.stop import StopStrings
from worker.wire.inbound import Logprobs

FINISH_STOP = "stop"


# A msgspec Struct rather than a NamedTuple: built in C, it costs about what the bare
# tuple did (a NamedTuple's `__new__` is Python and costs ~0.5 µs per call, once per
# choice and record). gc=False: it holds lists that never point back at it.
class Decoded(msgspec.Struct, gc=False):
    """What `decode_choice` made of one choice's tokens."""

    text: str  # the text to emit now
    finish_reason: str | None  # the engine's, or "stop" when a stop string fired
    stop_reason: int | str | None  # the engine's, the stop token, or the stop string
    logprobs: list[Resolved] | None  # the positions to show (None: none to show)
    text_ids: list[int]  # the ids the text comes from (a dropped stop token removed)


def shown_positions(
    state: RequestState, logprobs: Logprobs | None, ids: list[int], index: int, model: Model
) -> list[Position] | None:
    """Check a choice's logprobs (always, before any tokenizer work) and return the
    positions to show: when the request asked for logprobs, or when there was no
    request (then the engine decides, untrimmed); never for a prompt-only echo."""
    opts = state.opts
    keep = (opts.logprobs or opts.no_request) and not opts.hide_output
    limit = top_limit(state.api, opts.no_request, opts.top_logprobs)
    return parse_generate(logprobs, ids, model.vocab_size, index, limit, keep)


def decode_choice(
    state: RequestState,
    cs: ChoiceState,
    ids: list[int],
    finish: str | None,
    stop_reason: int | str | None,
    model: Model,
    tables: Tables,
    final: bool,
    positions: list[Position] | None,
) -> Decoded:
    """Token stop → detokenize → stop strings → logprobs, for one choice.

    Logprobs of tokens wholly after a stop string are not shown: the coupled server
    stops generating at the token that completes the stop string, so those tokens
    never exist there. A dropped stop token keeps its logprob: it was generated.
    """
    opts = state.opts
    detok: Detokenizer = model.detokenizer(opts.skip_special_tokens)
    # The decoder state before these ids is where their logprob texts start from (the
    # lists are replaced, never changed in place, so keeping them is enough).
    window, pending, held = cs.window, cs.pending, cs.held
    text_ids = ids
    if finish == FINISH_STOP:  # (only then can a stop token end the text)
        text_ids, stop_reason = _token_stop(ids, finish, stop_reason, opts, tables, model)
    text = detok.step(cs, text_ids)
    if final:
        text += flushed(detok, cs, finish)
    stops = tables.stops
    if tables.stopping:
        emit, cs.held, fired = stops.apply(cs.held, text, opts.include_stop_str_in_output, final)
    else:
        emit, cs.held, fired = (cs.held + text if cs.held else text), "", None
    if fired is not None:
        finish, stop_reason = FINISH_STOP, fired
    if not positions:
        return Decoded(emit, finish, stop_reason, None, text_ids)
    shown = len(positions)
    if fired is not None:
        shown = _tokens_through_stop(
            detok, cs.index, window, pending, held, text_ids, opts, stops, final
        )
    # An abort's cut character stays unresolved in the logprobs too (`flushed`).
    complete = final and finish != FINISH_ABORT and shown == len(positions)
    resolved = model.resolver().resolve(positions[:shown], window, pending, complete)
    return Decoded(emit, finish, stop_reason, resolved, text_ids)


# What a decoder shows for bytes that are no complete UTF-8 character (yet).
REPLACEMENT = "\ufffd"
FINISH_ABORT = "abort"


def flushed(detok: Detokenizer, cs: ChoiceState, finish: str | None) -> str:
    """What a finished choice's decoder still holds, as the one-shot decode shows it —
    but for an abort: the cancellation cut a character the next token would have
    completed, so the text ends before it, never with a U+FFFD the model did not write
    (vLLM sends none of the held token there, losing the text before it too)."""
    text = detok.flush(cs)
    return text.rstrip(REPLACEMENT) if finish == FINISH_ABORT else text


def unhidden(resolved: list[Resolved] | None, hidden: list[bool] | None) -> list[Resolved] | None:
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
    tables: Tables,
    model: Model,
) -> tuple[list[int], int | str | None]:
    """A stop token ends the text: drop it unless asked to keep it (vLLM's `_drop_stop_token` rule).

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
    is_stop = last in tables.stop_ids or last in model.eos_token_ids or last == stop_reason
    if not is_stop:
        return ids, stop_reason
    if stop_reason is None and last != primary_eos:
        stop_reason = last
    if opts.include_stop_str_in_output:
        return ids, stop_reason
    return ids[:-1], stop_reason


def _tokens_through_stop(
    detok: Detokenizer,
    index: int,
    window: list[int],
    pending: list[int],
    held: str,
    ids: list[int],
    opts: Options,
    stops: StopStrings,
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
        _, held, fired = stops.apply(held, text, opts.include_stop_str_in_output, ends)
        if fired is not None:
            return i + 1
    return len(ids)  # not reached: the same text fires on the same ids
