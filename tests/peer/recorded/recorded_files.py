"""What every recorded family's model folder is made of (recorded_models.py and the modules
beside it build the folders): the chat templates (tests/peer/templates/), the config ids and
dtype, the tokenizer_config.json of an offline or a marker tokenizer, one folder's files,
and a marker's ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tests.support.vocab.offline_tokenizers import offline_file, offline_tokenizer_json

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"

# Every config.json here names a dtype (never used: there are no weights).
BF16 = {"torch_dtype": "bfloat16"}
QWEN_IDS = {
    "vocab_size": 151936,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "max_position_embeddings": 40960,
}
# GLM-4.7's config: EOS <|endoftext|> (also the pad), <|user|>, <|observation|>.
GLM_IDS = {
    "vocab_size": 154880,
    "eos_token_id": [154820, 154827, 154829],
    "pad_token_id": 154820,
    "max_position_embeddings": 131072,
}
# The synthetic tokenizers' tokenizer_config.json: a fast tokenizer read from tokenizer.json.
MARKER_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "clean_up_tokenization_spaces": False,
    "model_max_length": 131072,
}

Files = dict[str, bytes]


def _template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def _files(
    tokenizer_json: str,
    tokenizer_config: dict[str, Any],
    template: str,
    config: dict[str, Any],
    **other: dict[str, Any],
) -> Files:
    """The folder's files; the template goes into tokenizer_config.json (`other`: more
    JSON files, by name without `.json`)."""
    tok_config = {**tokenizer_config, "chat_template": _template(template)}
    files = {
        "tokenizer.json": tokenizer_json.encode("utf-8"),
        "tokenizer_config.json": json.dumps(tok_config, indent=1, ensure_ascii=False).encode(),
        "config.json": json.dumps(config).encode(),
    }
    files.update({f"{name}.json": json.dumps(value).encode() for name, value in other.items()})
    return files


def _offline_config(name: str) -> dict[str, Any]:
    """The package's tokenizer_config.json without its own chat template (ours replaces it)."""
    config: dict[str, Any] = json.loads(offline_file(name, "tokenizer_config.json"))
    config.pop("chat_template", None)
    return config


def _marker_config(markers: tuple[str, ...], **named: str) -> dict[str, Any]:
    """A synthetic tokenizer's tokenizer_config.json: the `named` special tokens
    (eos_token=…, bos_token=…) and every other marker as additional_special_tokens."""
    rest = [m for m in markers if m not in named.values()]
    return {**MARKER_CONFIG, **named, "additional_special_tokens": rest}


def _qwen_chatml(architecture: str, model_type: str) -> Files:
    config = {"architectures": [architecture], "model_type": model_type, **QWEN_IDS, **BF16}
    return _files(
        offline_tokenizer_json("qwen-3"), _offline_config("qwen-3"), "chatml_think.jinja", config
    )


def _ids(tok: Tokenizer, *markers: str) -> list[int]:
    ids = [tok.token_to_id(m) for m in markers]
    missing = [m for m, i in zip(markers, ids, strict=True) if i is None]
    if missing:
        raise ValueError(f"no token {missing} in the tokenizer")
    return [i for i in ids if i is not None]
