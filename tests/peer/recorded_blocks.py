"""The model folders of Inkling, K2 Horizon and Muse (vllm-parsers-0.33.md rows 21, 22,
11), as `recorded_models.py` builds the other recorded families' (its `FOLDERS` joins
these). Tokenizers: the Qwen3 vocabulary with the family's markers (`tests/synthetic_*.py`);
templates: `tests/peer/templates/`. vLLM picks these parsers by their flags, not by the
architecture, so each config names Qwen3ForCausalLM (the families' own architectures need
configs with their vision and audio parts). Family (reasoning / tools):

- inkling (inkling / inkling): `inkling_tokenizer()`; Inkling blocks, the prompt ending
  `<|message_model|>` (or with a thinking / text block opened); EOS `<|endoftext|>`.
"""

from __future__ import annotations

from collections.abc import Callable

from tests import synthetic_inkling
from tests.peer.recorded_models import BF16, QWEN_IDS, Files, _files, _ids, _marker_config


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


FOLDERS: dict[str, Callable[[], Files]] = {"inkling": inkling}
