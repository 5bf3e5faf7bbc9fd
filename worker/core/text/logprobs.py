"""Logprobs: generate-side token ids → OpenAI token strings, `bytes`, chat and completion shapes.

The engine has no tokenizer, so it names tokens by id, in one of two shapes (vLLM
0.33.0 vllm/entrypoints/scale_out/token_in_token_out/protocol.py, `GenerateLogProbs`):
placeholders `{"token": "token_id:N"}` (shape A) or integers `{"token_id": N}` (shape
B). This module checks those payloads (no tokenizer work: errors come before any
decoding), then resolves every sampled and candidate id to its text.

**How a token's text is decided.** vLLM decodes each id alone and repairs a trailing
U+FFFD against up to 4 earlier ids (vllm/renderers/online_derenderer.py,
`_correct_decoded_token`). Decoding alone loses SentencePiece's leading space
("▁world" alone is "world"), so the sampled tokens would no longer add up to the text.
We run the incremental detokenizer one id at a time instead, from the choice's
decoder state before the record (its `window` and `pending` ids, which the request state
already carries), with `skip_special_tokens=False` so special tokens keep their text:

- a token's text is exactly what the text grew by when it arrived, so the sampled
  tokens' bytes concatenate to the UTF-8 of the one-shot decode, for byte-level BPE and
  SentencePiece byte fallback alike;
- the first half of a split character grows nothing: `""`, `bytes: []`; the completing
  token carries the whole character (vLLM's repair) — also when the halves arrive
  in different records, since the carried `pending` ids are the repair context (this is
  the context vLLM keeps as `logprob_context_token_ids`; here it costs no extra state);
- a candidate's text is what the text would have grown by had it been sampled instead.

Candidates are most of the work (5-20 per position), so their texts come from a bounded
per-model memo whenever the state makes the context irrelevant (nothing pending).
"""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer

from worker.core.errors import DerenderError
from worker.core.text.detokenize import REPLACEMENT_CHAR, Detokenizer
from worker.wire import outbound as out
from worker.wire.inbound import LogprobEntry, Logprobs

# Shape A's placeholder for a token the engine could not name (vLLM
# `format_token_id_placeholder`).
PLACEHOLDER = "token_id:"

# vLLM clamps logprobs at this floor (-inf and NaN included), as the coupled server does.
LOGPROB_FLOOR = -9999.0

# Per-model memo of candidate texts. Bounded so a long-lived worker cannot grow without
# limit (DeepSeek V4 has ~129k ids; real traffic touches a few thousand). FIFO eviction:
# cheaper than LRU bookkeeping and the hot ids are re-inserted at once.
MEMO_MAX_IDS = 32768

# A candidate: (id, text the engine already gave or None, logprob). A non-placeholder
# shape-A token keeps its text (vLLM behaviour) and has id -1.
Cand = tuple[int, str | None, float]
# A position: (sampled id, given text or None, logprob or None (a prompt position with no
# engine logprobs), candidates or None (the engine sent no candidate list)).
Position = tuple[int, str | None, float | None, list[Cand] | None]
# A resolved sampled token: (text, bytes or None, logprob).
Token = tuple[str, list[int] | None, float | None]
# A resolved position: (token, candidates or None). Candidates are built as the output
# struct at once (one allocation each); the completion shape reads them back.
Resolved = tuple[Token, list[out.TopLogprob] | None]

_NO_IDS: list[int] = []
_Top = out.TopLogprob
_UNSEEN: Any = object()  # a memo miss (None is a memo hit: "decode in context")


def _floor(value: float) -> float:
    # `not value >= floor` is also true for NaN.
    return value if value >= LOGPROB_FLOOR else LOGPROB_FLOOR


# -- checking and parsing (no tokenizer) ------------------------------------------------


def _bad(message: str) -> DerenderError:
    return DerenderError(message, param="logprobs")


def _entry(
    entry: LogprobEntry, vocab_size: int, i: int, index: int, j: int = -1
) -> tuple[int, str | None]:
    """(id, None) for a resolvable entry; (-1, text) for a shape-A token that is not a
    placeholder (kept as the engine wrote it, `bytes: null`). `i`, `index`, `j` say
    where it is, for the error message only (built only when there is an error)."""
    token, tid = entry.token, entry.token_id
    if tid is not None:
        if token is None and 0 <= tid < vocab_size:
            return tid, None
        if token is not None:
            raise _bad(f"{_where(i, index, j)} has both `token` and `token_id`: expected one")
        raise _bad(
            f"{_where(i, index, j)}: token_id {tid} is outside the vocabulary [0, {vocab_size})"
        )
    if token is None:
        raise _bad(f"{_where(i, index, j)} has neither `token` and `token_id`: expected one")
    if not token.startswith(PLACEHOLDER):
        return -1, token
    digits = token[len(PLACEHOLDER) :]
    # Strict: ASCII digits only (Python's int() would also take " 7", "+7" or "٧").
    if not (digits.isascii() and digits.isdigit()):
        raise _bad(f"{_where(i, index, j)}: token {token!r} is not a `token_id:N` placeholder")
    tid = int(digits)
    if tid >= vocab_size:
        raise _bad(
            f"{_where(i, index, j)}: token id {tid} is outside the vocabulary [0, {vocab_size})"
        )
    return tid, None


def parse_generate(
    logprobs: Logprobs | None,
    token_ids: list[int],
    vocab_size: int,
    index: int,
    limit: int | None,
    keep: bool,
) -> list[Position] | None:
    """Check one choice's generate logprobs; return its positions when `keep`.

    Every entry is checked (also candidates past `limit`, and also when the request did
    not ask for logprobs): a malformed payload is a producer bug and fails the request.
    `limit` is how many candidates to keep (None: all). None is returned when the
    choice carries no logprobs (`null`, or `content: null`).
    """
    if logprobs is None or logprobs.content is None:
        return None
    content = logprobs.content
    if len(content) != len(token_ids):
        raise _bad(
            f"logprobs.content length ({len(content)}) in choice {index} does not match "
            f"its token_ids length ({len(token_ids)})"
        )
    floor = LOGPROB_FLOOR
    positions: list[Position] = []
    for i, entry in enumerate(content):
        # The common shape-B entry is checked inline; anything else (and every error
        # message, built only when needed) goes through `_entry`. Hot: 1 + k per token.
        tid: int | None = entry.token_id
        given: str | None = None
        if tid is None or entry.token is not None or not 0 <= tid < vocab_size:
            tid, given = _entry(entry, vocab_size, i, index)
        sampled = token_ids[i]
        if tid >= 0 and tid != sampled:
            raise _bad(f"{_where(i, index)} names token {tid} but token_ids[{i}] is {sampled}")
        top = entry.top_logprobs
        cands: list[Cand] | None = None
        if top is not None:
            kept = top if limit is None or limit >= len(top) else top[:limit]
            if _plain_ids(top, vocab_size):
                if keep:
                    cands = [
                        (c.token_id, None, c.logprob if c.logprob >= floor else floor)  # type: ignore[misc]
                        for c in kept
                    ]
            else:
                cands = _candidates(top, len(kept), vocab_size, i, index, keep)
        if keep:
            lp = entry.logprob
            positions.append((sampled, given, lp if lp >= floor else floor, cands))
    return positions if keep else None


def _plain_ids(top: list[LogprobEntry], vocab_size: int) -> bool:
    """All candidates are well-formed shape-B entries (the common case, checked in one
    tight loop; anything else takes `_candidates`)."""
    for c in top:
        tid = c.token_id
        if tid is None or c.token is not None or c.top_logprobs or not 0 <= tid < vocab_size:
            return False
    return True


def _candidates(
    top: list[LogprobEntry], limit: int, vocab_size: int, i: int, index: int, keep: bool
) -> list[Cand]:
    cands: list[Cand] = []
    for j, cand in enumerate(top):
        if cand.top_logprobs:
            raise _bad(f"{_where(i, index, j)} has its own top_logprobs: a candidate has none")
        cid, cgiven = _entry(cand, vocab_size, i, index, j)
        if keep and j < limit:
            cands.append((cid, cgiven, _floor(cand.logprob)))
    return cands


def _where(i: int, index: int, j: int = -1) -> str:
    at = f"logprobs.content[{i}]" + (f".top_logprobs[{j}]" if j >= 0 else "")
    return f"{at} in choice {index}"


def parse_prompt(
    prompt_logprobs: list[dict[str, Any] | None],
    prompt_ids: list[int],
    vocab_size: int,
    limit: int | None,
) -> list[Position]:
    """vLLM's prompt logprobs (`[null, {"<id>": {"logprob", "rank", "decoded_token"}}, …]`,
    one per prompt token) as positions whose sampled id is the prompt's own token."""
    if len(prompt_logprobs) != len(prompt_ids):
        raise DerenderError(
            f"prompt_logprobs length ({len(prompt_logprobs)}) does not match the prompt's "
            f"token count ({len(prompt_ids)})",
            param="prompt_logprobs",
        )
    positions: list[Position] = []
    for i, (pid, entry) in enumerate(zip(prompt_ids, prompt_logprobs, strict=True)):
        if entry is None:  # vLLM: position 0 (nothing predicts the first token)
            positions.append((pid, None, None, None))
            continue
        where = f"prompt_logprobs[{i}]"
        sampled: tuple[str | None, float] | None = None
        cands: list[Cand] = []
        for j, (key, value) in enumerate(entry.items()):
            if not (key.isascii() and key.isdigit()) or int(key) >= vocab_size:
                raise DerenderError(
                    f"{where}: key {key!r} is not a token id in [0, {vocab_size})",
                    param="prompt_logprobs",
                )
            lp = value.get("logprob") if isinstance(value, dict) else None
            if isinstance(lp, bool) or not isinstance(lp, int | float):
                raise DerenderError(
                    f"{where}[{key!r}] needs a numeric `logprob`", param="prompt_logprobs"
                )
            decoded = value.get("decoded_token")
            if not isinstance(decoded, str) or decoded.startswith(PLACEHOLDER):
                decoded = None  # resolved from the id (the key) like any placeholder
            cid = int(key)
            if cid == pid:
                sampled = (decoded, _floor(float(lp)))
            if limit is None or j < limit:
                cands.append((cid, decoded, _floor(float(lp))))
        if sampled is None:
            raise DerenderError(
                f"{where} has no entry for the prompt token {pid}", param="prompt_logprobs"
            )
        positions.append((pid, sampled[0], sampled[1], cands))
    return positions


# -- resolving (tokenizer work) ---------------------------------------------------------


class _Slot:
    __slots__ = ("pending", "window")

    def __init__(self, window: list[int], pending: list[int]) -> None:
        self.window = window
        self.pending = pending


class Resolver:
    """Token texts for one tokenizer. Holds no per-request data, only the memo (whose
    contents never change an answer, only its cost)."""

    __slots__ = ("_alone", "_anchor", "_anchor_text", "_detok", "_follow")

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._detok = Detokenizer(tokenizer, skip_special_tokens=False)
        # A candidate's text after a finished window is its text after any finished
        # text (decoders act locally: byte-level, byte fallback, "▁" → " ", and the
        # first-piece strip that only an empty window sees). "a" stands for any.
        anchor = list(tokenizer.encode("a", add_special_tokens=False).ids)
        text = self._detok.decode(anchor) if anchor else ""
        usable = bool(text) and REPLACEMENT_CHAR not in text
        self._anchor = anchor if usable else []
        self._anchor_text = text if usable else ""
        # id → (text, bytes), or None when the context does matter (a partial character)
        self._follow: dict[int, tuple[str, list[int]] | None] = {}  # after finished text
        self._alone: dict[int, tuple[str, list[int]] | None] = {}  # first in the choice

    # The memo: texts of a candidate when nothing is pending.

    def _memo(self, tid: int, first: bool) -> tuple[str, list[int]] | None:
        memo = self._alone if first else self._follow
        try:
            return memo[tid]
        except KeyError:
            pass
        text: str | None
        if first:
            text = self._detok.decode([tid])
        elif self._anchor:
            full = self._detok.decode([*self._anchor, tid])
            # Not a continuation of the anchor's text: not local, decode in context.
            text = full[len(self._anchor_text) :] if full.startswith(self._anchor_text) else None
        else:
            text = None
        # A partial character depends on what precedes it: always decoded in context.
        value = None if text is None or REPLACEMENT_CHAR in text else (text, list(text.encode()))
        if len(memo) >= MEMO_MAX_IDS:
            del memo[next(iter(memo))]
        memo[tid] = value
        return value

    def _in_context(self, window: list[int], pending: list[int], tid: int, ctx: _Context) -> str:
        """What the text grows by had `tid` followed window + pending (vLLM's hold-back
        rule: nothing while it ends in U+FFFD or does not grow). Past an unfinished
        character that `tid` leaves unfinished, only its own text: the broken bytes are
        the earlier token's, not this candidate's."""
        full = self._detok.decode([*window, *pending, tid])
        if len(full) <= len(ctx.prefix) or full.endswith(REPLACEMENT_CHAR):
            return ""
        if pending and full.startswith(ctx.held):
            return full[len(ctx.held) :]
        return full[len(ctx.prefix) :]

    def resolve(
        self,
        positions: list[Position],
        window: list[int],
        pending: list[int],
        final: bool,
    ) -> list[Resolved]:
        """Texts of `positions`, starting from a choice's decoder state (`window`,
        `pending`) before their ids. `final`: the choice ends with the last position, so
        text still held (an unfinished character) is released onto it, as the text
        detokenizer's flush releases it."""
        feed = _Feed(self._detok, window)
        # Ids held by the text detokenizer were held here too, when their record was
        # resolved; feeding them again rebuilds the hold and says nothing new.
        for tid in pending:
            feed.step(tid)
        slot = feed.slot
        ctx = _Context()
        result: list[Resolved] = []
        for sid, given, logprob, cands in positions:
            w0, p0 = slot.window, slot.pending
            text = feed.step(sid)
            raw = list(text.encode())
            sampled: Token = (given, None, logprob) if given is not None else (text, raw, logprob)
            top: list[out.TopLogprob] | None = None
            if cands is not None:
                top = []
                # Nothing pending: the memo for this context; else every one in context.
                memo = None if p0 else (self._follow if w0 else self._alone)
                for cid, cgiven, clp in cands:
                    if cgiven is not None:
                        top.append(_Top(cgiven, clp, None))
                    elif cid == sid:
                        top.append(_Top(text, clp, raw))
                    else:
                        hit = None
                        if memo is not None:
                            hit = memo.get(cid, _UNSEEN)
                            if hit is _UNSEEN:
                                hit = self._memo(cid, not w0)
                        if hit is None:
                            ctx.at(self._detok, w0, p0)
                            ctext = self._in_context(w0, p0, cid, ctx)
                            top.append(_Top(ctext, clp, list(ctext.encode())))
                        else:
                            top.append(_Top(hit[0], clp, hit[1]))
            result.append((sampled, top))
        if final and slot.pending and result:
            self._release(result, self._detok.flush(slot))
        return result

    @staticmethod
    def _release(result: list[Resolved], rest: str) -> None:
        """Text still held when the choice ends goes onto its last token (and onto
        that token among its own candidates), as the text detokenizer's flush shows it."""
        (text, raw, logprob), top = result[-1]
        if raw is None:  # a given (non-placeholder) text stays as given
            return
        text += rest
        new_raw = list(text.encode())
        for t in top or ():
            if t.bytes is raw:
                t.token, t.bytes = text, new_raw
        result[-1] = ((text, new_raw, logprob), top)


class _Context:
    """Texts of the decoder state a position's candidates follow, decoded only when a
    candidate needs them and once per state (the slot's lists are replaced, never
    changed in place, so identity says whether the state moved)."""

    __slots__ = ("held", "pending", "prefix", "window")

    def __init__(self) -> None:
        self.window: list[int] | None = None
        self.pending: list[int] | None = None
        self.prefix = ""  # text of the window
        self.held = ""  # text of window + pending (ends in U+FFFD while a char is open)

    def at(self, detok: Detokenizer, window: list[int], pending: list[int]) -> None:
        if window is self.window and pending is self.pending:
            return
        self.window, self.pending = window, pending
        self.prefix = detok.decode(window)
        self.held = detok.decode([*window, *pending]) if pending else self.prefix


class _Feed:
    """The incremental decoder run one id at a time, with its state visible (`slot`)
    for the candidates: the text detokenizer's own step, so a token's text is exactly
    what the text grew by."""

    __slots__ = ("_detok", "slot")

    def __init__(self, detok: Detokenizer, window: list[int]) -> None:
        self._detok = detok
        self.slot = _Slot(window, _NO_IDS)

    def step(self, tid: int) -> str:
        return self._detok.step(self.slot, [tid])


# -- limits and shapes ------------------------------------------------------------------


def top_limit(api: str, no_request: bool, k: int) -> int | None:
    """How many engine candidates a position keeps (None: all), as the coupled
    endpoints apply the request's number (vLLM #59513).

    The engine lists the sampled token first, then ranks 1, 2, …. Chat (`top_logprobs:
    k`) keeps the first k, all for -1. Completion (`logprobs: k`) keeps entries i ≤ k:
    k + 1 when the sampled token is outside the top k; -1 keeps none (`{}`). With no
    request at all, whatever the engine sent.
    """
    if no_request:
        return None
    if api == "chat":
        return None if k < 0 else k
    return 0 if k < 0 else k + 1


def chat_logprobs(resolved: list[Resolved]) -> out.ChatLogprobs:
    return out.ChatLogprobs(
        [
            out.ChatLogprob(
                text,
                LOGPROB_FLOOR if logprob is None else logprob,
                raw,
                top or [],
            )
            for (text, raw, logprob), top in resolved
        ]
    )


def completion_logprobs(
    resolved: list[Resolved], offset: int
) -> tuple[out.CompletionLogprobs, int]:
    """The flat completion shape; `offset` is the first `text_offset` (it continues
    across records and after an echoed prompt). Returns the offset after the last token.

    Offsets advance by each token's length in code points, so the logprobs line up
    with themselves whatever the chunking (vLLM restarts each chunk at the emitted text
    length, which drifts while text is held back). A position with no engine
    candidates has `null` top logprobs, distinct from `{}` (all cut by the limit).
    """
    text_offset: list[int] = []
    token_logprobs: list[float | None] = []
    tokens: list[str] = []
    tops: list[dict[str, float] | None] = []
    for (text, _, logprob), top in resolved:
        text_offset.append(offset)
        tokens.append(text)
        token_logprobs.append(logprob)
        # Equal strings collapse, the last one wins (vLLM builds the same dict).
        tops.append(None if top is None else {t.token: t.logprob for t in top})
        offset += len(text)
    return out.CompletionLogprobs(text_offset, token_logprobs, tokens, tops), offset
