"""What the core needs to know about one served model: tokenizer, limits, parsers.

Built by the shell (`adapters.tokenizers` loads the files) and passed into `step`, so
the core never touches the file system.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenizers import Tokenizer

from worker.core.parsers import Parser
from worker.core.text.detokenize import Detokenizer
from worker.core.text.logprobs import Resolver


@dataclass(eq=False)
class Model:
    name: str
    tokenizer: Tokenizer
    max_model_len: int = 131072
    # -1 means no limit, as in vLLM.
    max_logprobs: int = 20
    # The first is the tokenizer's primary EOS: dropping it leaves `stop_reason` null,
    # as the engine does; the others are generation-config EOS ids (stop_reason = id).
    eos_token_ids: tuple[int, ...] = ()
    reasoning_parser: str | None = None
    tool_parser: str | None = None
    # `reasoning` (current vLLM) or `reasoning_content` (older clients).
    reasoning_field: str = "reasoning"
    # vLLM 0.33's VLLM_ENFORCE_STRICT_TOOL_CALLING (default on): with tool_choice
    # "required" or a named function the model writes its own tool-call format, which
    # is parsed as with "auto". Off: the output is the constrained JSON of those modes.
    strict_tool_calling: bool = True
    # The tokenizer_config.json's `response_template`: the output format the `hf` /
    # `beam` parsers read (parsers/response_template.py).
    response_template: dict[str, object] | None = None
    vocab_size: int = field(init=False)
    # The reasoning and tool-call formats compiled against the tokenizer (markers
    # that are single added tokens are matched by id).
    parser: Parser = field(init=False, repr=False)
    # By `skip_special_tokens` (public for the streamed record's path, stream.on_chunk,
    # which reads it without a call).
    detokenizers: dict[bool, Detokenizer] = field(init=False, repr=False)
    _resolver: Resolver | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self.vocab_size = int(self.tokenizer.get_vocab_size(with_added_tokens=True))
        self.detokenizers = {
            skip: Detokenizer(self.tokenizer, skip_special_tokens=skip) for skip in (False, True)
        }
        # Raises KeyError for an unknown format name (the registry reports it).
        self.parser = Parser.compile(
            self.reasoning_parser,
            self.tool_parser,
            self.tokenizer,
            reasoning_field=self.reasoning_field,
            strict=self.strict_tool_calling,
            response_template=self.response_template,
        )

    def detokenizer(self, skip_special_tokens: bool) -> Detokenizer:
        return self.detokenizers[skip_special_tokens]

    def resolver(self) -> Resolver:
        """Logprob token texts; built on first use (its memo fills only with logprobs)."""
        if self._resolver is None:
            self._resolver = Resolver(self.tokenizer)
        return self._resolver


from worker.constants import (  # noqa: E402
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MAX_STOP_LENGTH,
    DEFAULT_MAX_STOP_STRINGS,
    DEFAULT_MAX_STOP_TOKEN_IDS,
    DEFAULT_MAX_TOOLS,
    DEFAULT_MAX_TOOLS_BYTES,
)
from worker.core.tables import TableCache  # noqa: E402


@dataclass(eq=False)
class Registry:
    """Served models by name, plus the one used when a record names none, and the limits
    that hold for every model."""

    models: dict[str, Model]
    default: str
    # The largest output value `step` emits; a larger one fails its request instead.
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    # The request lists' bounds (bounds.check_lists).
    max_stop_strings: int = DEFAULT_MAX_STOP_STRINGS
    max_stop_length: int = DEFAULT_MAX_STOP_LENGTH
    max_stop_token_ids: int = DEFAULT_MAX_STOP_TOKEN_IDS
    max_tools: int = DEFAULT_MAX_TOOLS
    max_tools_bytes: int = DEFAULT_MAX_TOOLS_BYTES
    # The requests' compiled tables (a memo: the same content compiles once).
    tables: TableCache = field(default_factory=TableCache)

    def resolve(self, name: str | None) -> Model | None:
        return self.models.get(self.default if name is None else name)
