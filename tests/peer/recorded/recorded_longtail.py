"""The model folders of vLLM's long-tail tool parsers (docs/reference/parsers.md), as
`recorded_models.py` builds the other recorded families' (it writes these too: `FOLDERS`
here joins its own). Tokenizers: `tests/support/vocab/synthetic_longtail.py` (the Qwen3 vocabulary
with the family's markers); templates: `tests/peer/templates/`. Family (reasoning / tools):

- phi4_mini_json (— / phi4_mini_json): Phi-4-mini turns; Phi3ForCausalLM; EOS `<|end|>`.
- internlm (— / internlm): ChatML with InternLM2's `<|plugin|>` system turn; the
  architecture named is LlamaForCausalLM (InternLM2's own needs remote code, and the render
  server does not key on it); EOS `<|im_end|>`.
- jamba (— / jamba): Jamba 1.5 turns; JambaForCausalLM; EOS `<|eom|>`.
- apertus (— / apertus): Apertus turns; ApertusForCausalLM; EOS `<|assistant_end|>`.
- lfm2 (— / lfm2): ChatML with LFM2's tool list; Lfm2ForCausalLM; EOS `<|im_end|>`.
- plamo3 (plamo3 / plamo3): PLaMo 3 turns, the prompt ending `<|plamo:begin_think:plamo|>`
  when thinking is on; LlamaForCausalLM (PLaMo's own architecture needs remote code); EOS
  `<|plamo:tag|>`.
- dots (— / dots): dots.llm1 turns; Dots1ForCausalLM; EOS `<|endofresponse|>`.
- xlam (— / xlam): ChatML (xLAM-2-32b-fc-r is Qwen 2.5) with the tools in the system turn;
  Qwen2ForCausalLM; the real Qwen3 tokenizer; EOS `<|im_end|>`.
- gigachat3 (— / gigachat3): GigaChat3 messages; DeepseekV3ForCausalLM (GigaChat3's own
  architecture); EOS `</s>`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.peer.recorded.recorded_files import (
    BF16,
    QWEN_IDS,
    Files,
    _files,
    _ids,
    _marker_config,
    _offline_config,
)
from tests.support.vocab import synthetic_longtail as lt
from tests.support.vocab.offline_tokenizers import offline_tokenizer_json

PLAIN_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}


def _config(architecture: str, model_type: str, eos: list[int], **more: Any) -> dict[str, Any]:
    return {
        "architectures": [architecture],
        "model_type": model_type,
        **QWEN_IDS,
        "eos_token_id": eos,
        **more,
        **BF16,
    }


def phi4_mini_json() -> Files:
    tok = lt.phi4_mini_tokenizer()
    config = _config("Phi3ForCausalLM", "phi3", _ids(tok, "<|end|>", "<|endoftext|>"))
    return _files(
        tok.to_str(),
        _marker_config(lt.PHI4_MINI_MARKERS, eos_token="<|end|>"),
        "phi4_mini.jinja",
        config,
    )


def internlm() -> Files:
    tok = lt.internlm_tokenizer()
    config = _config("LlamaForCausalLM", "llama", _ids(tok, "<|im_end|>"))
    tok_config = _marker_config(lt.INTERNLM_MARKERS, eos_token="<|im_end|>")
    return _files(tok.to_str(), tok_config, "internlm.jinja", config)


def jamba() -> Files:
    tok = lt.jamba_tokenizer()
    config = _config("JambaForCausalLM", "jamba", _ids(tok, "<|eom|>"))
    tok_config = _marker_config(lt.JAMBA_TURNS, eos_token="<|eom|>", bos_token="<|bom|>")
    return _files(tok.to_str(), tok_config, "jamba.jinja", config)


def gigachat3() -> Files:
    tok = lt.gigachat3_tokenizer()
    config = _config("DeepseekV3ForCausalLM", "deepseek_v3", _ids(tok, "</s>"))
    tok_config = _marker_config(lt.GIGACHAT3_MARKERS, eos_token="</s>", bos_token="<s>")
    return _files(tok.to_str(), tok_config, "gigachat3.jinja", config)


def apertus() -> Files:
    tok = lt.apertus_tokenizer()
    config = _config("ApertusForCausalLM", "apertus", _ids(tok, "<|assistant_end|>"))
    tok_config = _marker_config(lt.APERTUS_MARKERS, eos_token="<|assistant_end|>")
    return _files(tok.to_str(), tok_config, "apertus.jinja", config)


def lfm2() -> Files:
    tok = lt.lfm2_tokenizer()
    config = _config("Lfm2ForCausalLM", "lfm2", _ids(tok, "<|im_end|>"))
    tok_config = _marker_config(lt.LFM2_MARKERS, eos_token="<|im_end|>")
    return _files(tok.to_str(), tok_config, "lfm2.jinja", config)


def plamo3() -> Files:
    tok = lt.plamo3_tokenizer()
    config = _config("LlamaForCausalLM", "llama", _ids(tok, "<|plamo:tag|>"))
    tok_config = _marker_config(
        lt.PLAMO3_MARKERS, eos_token="<|plamo:tag|>", bos_token="<|plamo:bos|>"
    )
    return _files(tok.to_str(), tok_config, "plamo3.jinja", config)


def dots() -> Files:
    tok = lt.dots_tokenizer()
    config = _config("Dots1ForCausalLM", "dots1", _ids(tok, "<|endofresponse|>"))
    tok_config = _marker_config(lt.DOTS_TURNS, eos_token="<|endofresponse|>")
    return _files(tok.to_str(), tok_config, "dots.jinja", config)


def xlam() -> Files:
    config = _config("Qwen2ForCausalLM", "qwen2", [151645])
    return _files(offline_tokenizer_json("qwen-3"), _offline_config("qwen-3"), "xlam.jinja", config)


FOLDERS: dict[str, Callable[[], Files]] = {
    "phi4_mini_json": phi4_mini_json,
    "internlm": internlm,
    "jamba": jamba,
    "gigachat3": gigachat3,
    "apertus": apertus,
    "lfm2": lfm2,
    "plamo3": plamo3,
    "dots": dots,
    "xlam": xlam,
}


def _more() -> None:
    # MiniCPM-V, MiniCPM5 and the response-template parsers (recorded_minicpm.py).
    from tests.peer.recorded.recorded_minicpm import FOLDERS as MINICPM

    FOLDERS.update(MINICPM)


_more()
