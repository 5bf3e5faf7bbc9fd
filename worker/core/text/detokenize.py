"""Incremental detokenization with the decoder state kept as data.

The algorithm is vLLM's `detokenize_incrementally` (vLLM 0.33.0
vllm/tokenizers/detokenizer_utils.py): decode `window + pending + new` against the text
of `window` alone, emit the difference once it is longer and does not end in U+FFFD (a
possibly unfinished UTF-8 sequence from byte-level or byte-fallback pieces), then the
ids just emitted become the next window. HF `tokenizers`' `DecodeStream` runs exactly
that loop in Rust; its Python object cannot be serialised, so we keep its two lists
ourselves:

- `window`: ids already turned into text, kept only as decoder context (a SentencePiece
  decoder strips the leading space of the first piece, so the next piece's space needs a
  piece before it). Always starts on a character boundary, and past the output's start
  never on a byte piece that such a strip removes alone (`<0x20>`): that byte can still
  join an invalid byte run that follows, and then the one-shot decode shows it as U+FFFD
  where the window alone showed nothing, so the difference would count it twice.
- `pending`: ids whose text is not out yet (an unfinished character, or nothing visible).

A step is two one-shot decodes (window, and window + pending + new), one Rust call each
whatever the record's length; only a multi-id record that ends in an unfinished character
is walked id by id, to release the finished part now. (`DecodeStream` walks the same loop
in Rust but keeps the just-emitted ids as its window whatever they are, the `<0x20>`
above included, so it is not used.)

Byte-level decoders (GPT-2 style: DeepSeek, Llama 3, Qwen) need no window, and there a
step with nothing pending is usually not a decode at all: the text of one id that is whole
UTF-8 on its own is memoised, and ids that all have such a text decode to the
concatenation of their texts (the decoder joins the ids' bytes, so whole pieces join into
whole text). Ids with an incomplete character go the long way, as before.
"""

from __future__ import annotations

from typing import Protocol

from tokenizers import Tokenizer, decoders

REPLACEMENT_CHAR = "\ufffd"

# The window is trimmed back to at most this many ids after a multi-id emission.
# vLLM's per-token loop ends every emitting step with a 1-2 id window; 4 covers a
# whole UTF-8 character spelled as byte-fallback pieces.
WINDOW_MAX_IDS = 4

# When no short suffix is a clean window (a run of invisible ids), keep this many.
WINDOW_FALLBACK_IDS = 32

# vLLM seeds from the last INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET (5) prompt ids,
# so the first output piece keeps its leading space (online_derenderer.py's
# `_seed_stream_state`).
PROMPT_SEED_IDS = 5

# A run of ids that produce no text (skipped special tokens) or never complete a
# character (garbage bytes) must not grow the state without bound. Past this many
# pending ids they are resolved the way a one-shot decode would.
PENDING_MAX_IDS = 64

# Memoised texts of single ids (byte-level decoders), at most this many: a vocabulary's
# worth (~10 MB for 200k entries), beyond which new ids are decoded every time.
MEMO_MAX_IDS = 262_144


class DecodeSlot(Protocol):
    """The two lists a decoder needs; `core.state.ChoiceState` is one."""

    window: list[int]
    pending: list[int]


class Detokenizer:
    """Incremental decoding for one tokenizer and one `skip_special_tokens` setting.

    Holds no per-request data: every call reads and writes a `DecodeSlot`.
    """

    __slots__ = ("_context_free", "_decode", "_lead", "_partial", "_skip", "_tok", "memo")

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._decode = tokenizer.decode  # bound once: this is the hot call
        # A byte-level decoder turns each piece into bytes and the bytes into text: the
        # text of ids that start on a character boundary does not depend on what came
        # before them. Then no window is needed (one decode per step, no window in the
        # state). Decoders that strip or merge across pieces (SentencePiece's leading
        # space, WordPiece's "##") keep the window.
        self._context_free = isinstance(tokenizer.decoder, decoders.ByteLevel)
        # id → its text, for ids whose bytes are whole UTF-8 alone (context-free only:
        # empty otherwise). Public for the streamed record's path (stream.on_chunk),
        # which reads it without a call: an id found here with nothing pending is
        # exactly what `step` returns for it.
        self.memo: dict[int, str] = {}
        self._partial: set[int] = set()  # ids that are not whole alone (never memoised)
        # Byte pieces that may not start a window past the output's start (see above).
        self._lead = frozenset() if self._context_free else _stripped_bytes(tokenizer)

    def decode(self, ids: list[int]) -> str:
        """One-shot decode: the text all chunkings must concatenate to."""
        text: str = self._decode(ids, self._skip)
        return text

    def seed(self, prompt_token_ids: list[int] | None) -> list[int]:
        """The first window of a choice: the prompt's last ids, when it is known."""
        if not prompt_token_ids or self._context_free:
            return []
        return self._trim(prompt_token_ids[-PROMPT_SEED_IDS:])

    def step(self, slot: DecodeSlot, ids: list[int]) -> str:
        """Feed new ids; return the text that is now final (possibly "")."""
        if not ids:
            return ""
        if slot.pending:
            return self._settle(slot, slot.pending + ids)
        if self._context_free:
            text = self._whole(ids)
            if text is not None:
                return text  # (the window stays empty, nothing is pending)
        return self._settle(slot, ids)

    def _whole(self, ids: list[int]) -> str | None:
        """The text of ids that are each whole UTF-8 alone, from the memo; None when one
        is not (or cannot be memoised), and the ids must be decoded together."""
        memo = self.memo
        if len(ids) == 1:
            text = memo.get(ids[0])
            return text if text is not None else self._learn(ids[0])
        parts = []
        for i in ids:
            text = memo.get(i)
            if text is None:
                text = self._learn(i)
                if text is None:
                    return None
            parts.append(text)
        return "".join(parts)

    def _learn(self, token_id: int) -> str | None:
        if token_id in self._partial or len(self.memo) >= MEMO_MAX_IDS:
            return None
        text: str = self._decode([token_id], self._skip)
        # U+FFFD marks bytes that are not whole UTF-8 alone (or, rarely, a piece that is
        # U+FFFD itself): such ids are decoded with their neighbours every time.
        if REPLACEMENT_CHAR in text:
            self._partial.add(token_id)
            return None
        self.memo[token_id] = text
        return text

    def flush(self, slot: DecodeSlot) -> str:
        """The choice ended: release what is pending exactly as a one-shot decode shows it."""
        if not slot.pending:
            return ""
        prefix = self.decode(slot.window)
        full = self.decode(slot.window + slot.pending)
        slot.window = self._next_window(slot.window, slot.pending)
        slot.pending = []
        return _suffix(full, prefix)

    # -- internals ----------------------------------------------------------------------

    def _per_id(self, slot: DecodeSlot, todo: list[int]) -> str:
        """Emit `todo` id by id (vLLM's per-token loop): every finished character now,
        the unfinished tail pending. Sliced by length where an invalid byte run
        straddles the window's edge, as vLLM does."""
        decode, skip = self._decode, self._skip
        window = slot.window
        prefix: str = decode(window, skip) if window else ""
        parts: list[str] = []
        start = 0  # index in `todo` of the first id not yet emitted
        for i in range(len(todo)):
            full: str = decode(window + todo[start : i + 1], skip)
            if len(full) > len(prefix) and not full.endswith(REPLACEMENT_CHAR):
                parts.append(full[len(prefix) :])
                window = self._next_window(window, todo[start : i + 1])
                prefix = decode(window, skip) if window else ""
                start = i + 1
        slot.window = window
        slot.pending = todo[start:]
        self._bound(slot)
        return "".join(parts)

    def _settle(self, slot: DecodeSlot, todo: list[int]) -> str:
        window = slot.window
        # Two decodes, as many as DecodeStream's own per-token loop does. (Rebuilding a
        # DecodeStream from the window would cost a third: it decodes its new prefix
        # for a next step that never comes, since the object is not kept.)
        decode, skip = self._decode, self._skip
        prefix: str = decode(window, skip) if window else ""
        full: str = decode(window + todo, skip)
        if len(full) > len(prefix) and not full.endswith(REPLACEMENT_CHAR):
            slot.window = self._next_window(window, todo)
            slot.pending = []
            # Not a prefix only when an invalid byte run straddles the window edge;
            # vLLM slices by length then, and so do we.
            return full[len(prefix) :]
        if len(todo) > 1 and len(full) > len(prefix):
            # The tail is unfinished, but a prefix of it may not be: go id by id so the
            # client sees every finished character now, as vLLM's per-token loop does.
            return self._per_id(slot, todo)
        slot.pending = todo
        self._bound(slot)
        return ""

    def _bound(self, slot: DecodeSlot) -> None:
        if len(slot.pending) <= PENDING_MAX_IDS:
            return
        prefix = self.decode(slot.window)
        full = self.decode(slot.window + slot.pending)
        if full == prefix:
            # Nothing visible (e.g. skipped special tokens): the ids change no text.
            slot.pending = []
        # Otherwise a long unfinished byte run: keep it; flush() resolves it at the end.
        # It cannot exceed one record's token count, which the bounds already cap.

    def _next_window(self, window: list[int], emitted: list[int]) -> list[int]:
        """The window after `emitted` ids came out as text after `window`."""
        if self._context_free:
            return []
        if len(emitted) <= WINDOW_MAX_IDS and (not window or emitted[0] not in self._lead):
            # The common case: no decode. (An empty `window` is the output's start, where
            # the strip is the one-shot decode's too, so the ids are the right context.)
            return emitted
        # Too long, or starting on a stripped byte: a suffix of everything so far.
        return self._trim(window + emitted)

    def _trim(self, ids: list[int]) -> list[int]:
        """The shortest suffix (≤ WINDOW_MAX_IDS) that still decodes to visible text
        starting on a character boundary; the whole list when there is none.

        Starting mid-character would let a byte-fallback decoder merge the window's
        dangling bytes with the next ones, so a suffix whose text starts with U+FFFD
        is not a valid window. An empty-text suffix would lose SentencePiece's leading
        space of the next piece, and one starting on a stripped byte its own (`_lead`).
        """
        lead = self._lead
        for n in range(1, min(len(ids), WINDOW_MAX_IDS) + 1):
            if ids[-n] in lead:
                continue
            text = self.decode(ids[-n:])
            if text and not text.startswith(REPLACEMENT_CHAR):
                return ids[-n:]
        # No such suffix (e.g. all skipped special tokens): keep more context, bounded.
        return ids[-WINDOW_FALLBACK_IDS:]


def _suffix(full: str, prefix: str) -> str:
    if full.startswith(prefix):
        return full[len(prefix) :]
    # Not a prefix (an invalid byte run changed meaning); emit by length like vLLM.
    return full[len(prefix) :] if len(full) > len(prefix) else ""


def _stripped_bytes(tokenizer: Tokenizer) -> frozenset[int]:
    """Byte-fallback pieces (`<0x20>`, …) whose text alone is not their text after other
    text: a decoder that strips the output's leading space strips a lone `<0x20>` to
    nothing. Found by decoding each of the 256 byte pieces after an anchor ("a")."""
    anchor = tokenizer.encode("a", add_special_tokens=False).ids
    anchor_text = tokenizer.decode(anchor, skip_special_tokens=False) if anchor else ""
    if not anchor_text or REPLACEMENT_CHAR in anchor_text:
        return frozenset()
    found = set()
    for byte in range(256):
        tid = tokenizer.token_to_id(f"<0x{byte:02X}>")
        if tid is None:
            continue
        after = tokenizer.decode([*anchor, tid], skip_special_tokens=False)
        alone = tokenizer.decode([tid], skip_special_tokens=False)
        if after.startswith(anchor_text) and after[len(anchor_text) :] != alone:
            found.add(tid)
    return frozenset(found)
