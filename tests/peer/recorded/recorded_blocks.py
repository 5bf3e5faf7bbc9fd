"""The model folders of Inkling, K2 Horizon and Muse (docs/reference/parsers.md), as
`recorded_models.py` builds the other recorded families' (its `FOLDERS` joins these).
Tokenizers: the Qwen3 vocabulary with the family's markers (`tests/synthetic_*.py`);
templates: `tests/peer/templates/`. vLLM picks these parsers by their flags, not by the
architecture, so each config names Qwen3ForCausalLM (the families' own architectures need
configs with their vision and audio parts). Family (reasoning / tools):

- inkling (inkling / inkling): `inkling_tokenizer()`; Inkling blocks, the prompt ending
  `<|message_model|>` (or with a thinking / text block opened); EOS `<|endoftext|>`.
- k2_horizon (k2_horizon / k2_horizon): `k2_horizon_tokenizer()`; ChatML turns, the prompt
  ending with the think opener `reasoning_effort` picks (`<ifm|think>` by default); EOS
  `<|im_end|>`.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.peer.recorded.recorded_files import (
    BF16,
    MARKER_CONFIG,
    QWEN_IDS,
    Files,
    _files,
    _ids,
    _marker_config,
)
from tests.support.vocab import synthetic_inkling, synthetic_k2_horizon, synthetic_muse


def inkling() -> Files:
    tok = synthetic_inkling.inkling_tokenizer()
    [eos] = _ids(tok, synthetic_inkling.INKLING_EOS)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        **QWEN_IDS,
        "eos_token_id": eos,
        **BF16,
    }
    tok_config = _marker_config(
        synthetic_inkling.INKLING_MARKERS, eos_token=synthetic_inkling.INKLING_EOS
    )
    return _files(tok.to_str(), tok_config, "inkling.jinja", config)


def k2_horizon() -> Files:
    tok = synthetic_k2_horizon.k2_horizon_tokenizer()
    [eos] = _ids(tok, synthetic_k2_horizon.K2_HORIZON_EOS)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        **QWEN_IDS,
        "eos_token_id": eos,
        **BF16,
    }
    # The markers are added tokens, not special ones: none is listed as special here.
    tok_config = {**MARKER_CONFIG, "eos_token": synthetic_k2_horizon.K2_HORIZON_EOS}
    return _files(tok.to_str(), tok_config, "k2_horizon.jinja", config)


def muse() -> Files:
    tok = synthetic_muse.muse_tokenizer()
    [eos] = _ids(tok, synthetic_muse.MUSE_EOS)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        **QWEN_IDS,
        "eos_token_id": eos,
        **BF16,
    }
    tok_config = _marker_config(synthetic_muse.MUSE_MARKERS, eos_token=synthetic_muse.MUSE_EOS)
    return _files(tok.to_str(), tok_config, "muse.jinja", config)


FOLDERS: dict[str, Callable[[], Files]] = {
    "inkling": inkling,
    "k2_horizon": k2_horizon,
    "muse": muse,
}
