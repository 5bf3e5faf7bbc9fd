"""Row 2: vLLM's per-token Python algorithm (vLLM 0.33.0 `detokenize_incrementally`,
`_detokenize_delta`), lean and HF-shaped, its state as an object or as JSON."""

from __future__ import annotations

import json

from tokenizers import Tokenizer

from corebench.profile import REPLACEMENT_CHAR, SKIP_SPECIAL

# -- 2) vLLM's per-token Python algorithm ------------------------------------------------


class VllmState:
    """The fields of `DerenderStreamState` the plain path reads and writes."""

    __slots__ = ("prefix_offset", "prev_tokens", "read_offset", "role_sent")

    def __init__(
        self,
        prev_tokens: list[str] | None = None,
        prefix_offset: int = 0,
        read_offset: int = 0,
        role_sent: bool = False,
    ) -> None:
        self.prev_tokens = prev_tokens if prev_tokens is not None else []
        self.prefix_offset = prefix_offset
        self.read_offset = read_offset
        self.role_sent = role_sent

    def to_json(self) -> str:
        return json.dumps(
            {
                "prev_tokens": self.prev_tokens,
                "prefix_offset": self.prefix_offset,
                "read_offset": self.read_offset,
                "role_sent": self.role_sent,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> VllmState:
        d = json.loads(text)
        return cls(d["prev_tokens"], d["prefix_offset"], d["read_offset"], d["role_sent"])


class VllmDetokenizer:
    """`detokenize_incrementally` + `_detokenize_delta` for a fast tokenizer.

    `convert_ids_to_tokens([id])` is `id_to_token` (skipping special ids when asked) and
    `convert_tokens_to_string` is `backend_tokenizer.decoder.decode`, as in
    transformers' `PreTrainedTokenizerFast`. The transformers wrapper's own Python
    overhead is left out (and vLLM's cached special-id set and `len()` are assumed), so
    this is a lower bound on vLLM's cost.
    """

    def __init__(self, tok: Tokenizer, skip_special_tokens: bool) -> None:
        self._tok = tok
        self._decode_pieces = tok.decoder.decode
        self._vocab_len = tok.get_vocab_size(with_added_tokens=True)
        added = tok.get_added_tokens_decoder()
        self._special = frozenset(i for i, t in added.items() if t.special)
        self._skip = skip_special_tokens

    def _pieces(self, token_id: int) -> list[str]:
        if not 0 <= token_id < self._vocab_len:
            return [""]
        if self._skip and token_id in self._special:
            return []
        return [self._tok.id_to_token(token_id) or ""]

    def delta(self, state: VllmState, ids: list[int]) -> str:
        window, p, r = state.prev_tokens, state.prefix_offset, state.read_offset
        decode = self._decode_pieces
        text = ""
        for token_id in ids:
            output_tokens = window + self._pieces(token_id)
            prefix_text = decode(output_tokens[p:r])
            new_text = decode(output_tokens[p:])
            if len(new_text) > len(prefix_text) and not new_text.endswith(REPLACEMENT_CHAR):
                text += new_text[len(prefix_text) :]
                p, r = r, len(output_tokens)
            window = output_tokens
        state.prev_tokens, state.prefix_offset, state.read_offset = window[p:], 0, r - p
        return text


class HfFastShim:
    """The call shape of transformers' `PreTrainedTokenizerFast` as vLLM calls it.

    Mirrors `convert_ids_to_tokens` (list path: a set of the special ids per call, an
    `int()` per id) and `convert_tokens_to_string` (`backend_tokenizer.decoder`, fetched
    twice), with what vLLM's `get_cached_tokenizer` caches (`all_special_ids`, `len`).
    An approximation of the wrapper's overhead; transformers itself is not installed.
    """

    is_fast = True

    def __init__(self, tok: Tokenizer) -> None:
        self._tokenizer = tok
        self._len = tok.get_vocab_size(with_added_tokens=True)
        # DeepSeek V4's special_tokens_map: bos, eos, pad.
        names = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>")
        self.all_special_ids = [i for i in map(tok.token_to_id, names) if i is not None]

    def __len__(self) -> int:
        return self._len

    @property
    def backend_tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def convert_ids_to_tokens(
        self, ids: int | list[int], skip_special_tokens: bool = False
    ) -> str | list[str]:
        if isinstance(ids, int):
            return self._tokenizer.id_to_token(ids) or ""
        tokens = []
        ids_to_skip = set(self.all_special_ids) if skip_special_tokens else set()
        for index in ids:
            index = int(index)
            if index in ids_to_skip:
                continue
            tokens.append(self._tokenizer.id_to_token(index))
        return tokens

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return (
            str(self.backend_tokenizer.decoder.decode(tokens))
            if self.backend_tokenizer.decoder is not None
            else " ".join(tokens)
        )


def hf_detokenize_incrementally(
    tokenizer: HfFastShim,
    new_token_id: int,
    prev_tokens: list[str],
    prefix_offset: int,
    read_offset: int,
    skip_special_tokens: bool,
) -> tuple[list[str], str, int, int]:
    """vLLM's `detokenize_incrementally` (vllm/tokenizers/detokenizer_utils.py) with the
    tokenizer calls vLLM makes (fast-tokenizer branch)."""
    if 0 <= new_token_id < len(tokenizer):
        new_tokens = tokenizer.convert_ids_to_tokens(
            [new_token_id], skip_special_tokens=skip_special_tokens
        )
        if isinstance(new_tokens, str):
            new_tokens = [new_tokens]
        else:
            new_tokens = [t if t is not None else "" for t in new_tokens]
    else:
        new_tokens = [""]
    output_tokens = prev_tokens + new_tokens
    prefix_text = tokenizer.convert_tokens_to_string(output_tokens[prefix_offset:read_offset])
    new_text = tokenizer.convert_tokens_to_string(output_tokens[prefix_offset:])
    if len(new_text) <= len(prefix_text) or new_text.endswith(REPLACEMENT_CHAR):
        return new_tokens, "", prefix_offset, read_offset
    return new_tokens, new_text[len(prefix_text) :], read_offset, len(output_tokens)


def hf_detokenize_delta(shim: HfFastShim, state: VllmState, ids: list[int]) -> str:
    """vLLM's `_detokenize_delta` (vllm/renderers/online_derenderer.py) around
    `hf_detokenize_incrementally`."""
    window, p, r = state.prev_tokens, state.prefix_offset, state.read_offset
    text = ""
    for token_id in ids:
        pieces, t, p, r = hf_detokenize_incrementally(shim, token_id, window, p, r, SKIP_SPECIAL)
        window = window + pieces
        text += t
    state.prev_tokens, state.prefix_offset, state.read_offset = window[p:], 0, r - p
    return text


def vllm_object(vd: VllmDetokenizer, chunks: list[list[int]]) -> list[str]:
    state = VllmState()
    return [vd.delta(state, chunk) for chunk in chunks]


def vllm_json(vd: VllmDetokenizer, chunks: list[list[int]]) -> list[str]:
    blob = VllmState().to_json()
    out: list[str] = []
    for chunk in chunks:
        state = VllmState.from_json(blob)
        out.append(vd.delta(state, chunk))
        state.role_sent = True
        blob = state.to_json()
    return out


def vllm_hf_json(shim: HfFastShim, chunks: list[list[int]]) -> list[str]:
    blob = VllmState().to_json()
    out: list[str] = []
    for chunk in chunks:
        state = VllmState.from_json(blob)
        out.append(hf_detokenize_delta(shim, state, chunk))
        state.role_sent = True
        blob = state.to_json()
    return out


def vllm_hf_object(shim: HfFastShim, chunks: list[list[int]]) -> list[str]:
    state = VllmState()
    return [hf_detokenize_delta(shim, state, chunk) for chunk in chunks]
