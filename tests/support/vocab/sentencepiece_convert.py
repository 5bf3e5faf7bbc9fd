"""Build a HF `tokenizers` tokenizer from a SentencePiece BPE model, offline.

The tests need a real SentencePiece byte-fallback tokenizer (Llama-2 style: the first
piece's leading space is stripped, unknown characters become `<0xNN>` byte pieces).
`mistral-common` ships one as `data/tokenizer.model.v1`; this turns it into the same
pipeline a `tokenizer.json` for such a model has: a BPE model with byte fallback, a
normalizer that adds the dummy prefix and escapes spaces as "▁", and a decoder that
undoes both. `test_tokenizers.py` checks it encodes exactly like sentencepiece.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, normalizers
from tokenizers.models import BPE

# sentencepiece's ModelProto.SentencePiece.Type values
_UNKNOWN, _CONTROL, _USER_DEFINED = 2, 3, 4
_BPE_MODEL = 2
SPACE = "▁"


def mistral_v1_model() -> Path:
    spec = importlib.util.find_spec("mistral_common")
    assert spec is not None and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / "data" / "tokenizer.model.v1"


def _merges(pieces: list[tuple[str, float]]) -> list[tuple[str, str]]:
    """Every way to build a piece from two others, best-scored pieces merging first.

    A SentencePiece BPE model stores no merge list, only scored pieces; a piece that
    splits into two pieces of the vocabulary is the result of merging them.
    """
    ids = {p: i for i, (p, _) in enumerate(pieces)}
    ranked: list[tuple[float, int, int, str, str]] = []
    for piece, score in pieces:
        splits = [
            (piece[:k], piece[k:])
            for k in range(1, len(piece))
            if piece[:k] in ids and piece[k:] in ids
        ]
        splits.sort(key=lambda lr: (ids[lr[0]], ids[lr[1]]))
        ranked += [(score, len(left), len(right), left, right) for left, right in splits]
    # Highest score first; for equal scores the longer left part, then the longer right.
    ranked.sort(key=lambda r: (r[0], r[1], r[2]), reverse=True)
    return [(left, right) for _, _, _, left, right in ranked]


def convert(model_path: Path) -> Tokenizer:
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model_path.read_bytes())
    if proto.trainer_spec.model_type != _BPE_MODEL:
        raise ValueError(f"{model_path}: only SentencePiece BPE models are supported")
    norm = proto.normalizer_spec
    if norm.remove_extra_whitespaces or norm.precompiled_charsmap:
        raise ValueError(f"{model_path}: normalization rules are not supported")
    pieces = [(p.piece, p.score) for p in proto.pieces]
    vocab = {p: i for i, (p, _) in enumerate(pieces)}
    tok = Tokenizer(
        BPE(
            vocab,
            _merges(pieces),
            unk_token=proto.trainer_spec.unk_piece or "<unk>",
            fuse_unk=True,
            byte_fallback=proto.trainer_spec.byte_fallback,
        )
    )
    specials = [p.piece for p in proto.pieces if p.type in (_UNKNOWN, _CONTROL)]
    user = [p.piece for p in proto.pieces if p.type == _USER_DEFINED]
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    tok.add_tokens([AddedToken(s, normalized=False) for s in user])
    steps: list[normalizers.Normalizer] = []
    if norm.add_dummy_prefix:
        steps.append(normalizers.Prepend(SPACE))
    steps.append(normalizers.Replace(" ", SPACE))
    tok.normalizer = normalizers.Sequence(steps)
    dec: list[decoders.Decoder] = [
        decoders.Replace(SPACE, " "),
        decoders.ByteFallback(),
        decoders.Fuse(),
    ]
    if norm.add_dummy_prefix:
        dec.append(decoders.Strip(" ", 1, 0))
    tok.decoder = decoders.Sequence(dec)
    return tok


def sentencepiece_tokenizer() -> Tokenizer:
    return convert(mistral_v1_model())


if __name__ == "__main__":  # write the tokenizer.json, e.g. for a registry entry
    import sys

    out = sys.argv[1] if len(sys.argv) > 1 else "llama-sp-tokenizer.json"
    sentencepiece_tokenizer().save(out)
    print(f"wrote {out}")
