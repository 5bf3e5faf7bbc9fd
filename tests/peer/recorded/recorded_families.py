"""The model folders of the families of tests/support/vocab/synthetic_families.py and
synthetic_cohere.py (Granite 3.x, OLMo 3, Step-3, ERNIE 4.5, Hunyuan A13B, HY, HY with the
template's suffix, Cohere Command A), as recorded_models.py builds the others; its
`FOLDERS` lists them."""

from __future__ import annotations

from tests.peer.recorded.recorded_files import (
    BF16,
    Files,
    _files,
    _ids,
    _marker_config,
    _offline_config,
)
from tests.support.vocab import synthetic_cohere
from tests.support.vocab import synthetic_families as synth_families
from tests.support.vocab.offline_tokenizers import offline_tokenizer_json


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
