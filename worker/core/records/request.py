"""Opening a request: its seq-0 record → model, options, `created`, prompt seed, parser,
and the request's tables (stop strings, stop ids, tools: core/tables.py).

Everything a later record needs from the request is kept here: later records carry only
engine output, never the request again. What is small and shapes every record goes into
the state; what may be large and never changes goes into the tables, stored once.
"""

from __future__ import annotations

from worker.core import apis, errors
from worker.core.bounds import check_ids, check_lists, check_options
from worker.core.errors import DerenderError
from worker.core.model import Model, Registry
from worker.core.state import Options, RequestState
from worker.core.tables import RequestTables, Tables
from worker.core.text.stop import normalize_stop
from worker.wire.inbound import ChatRequest, ChunkRecord


def open_request(
    record: ChunkRecord, registry: Registry, timestamp_ms: int | None
) -> tuple[RequestState, Tables]:
    """The state of a new request and its tables. `created` is the record's, else its
    broker timestamp (passed in: the core reads no clock), else 0."""
    model = registry.resolve(record.model)
    if model is None:
        raise DerenderError(
            f"The model `{record.model}` does not exist.", errors.MODEL_NOT_FOUND, "model"
        )
    api = record.api or "chat"
    req = request_of(record, api)
    tools_json = b""
    if req is not None:
        tools_json = check_lists(req, registry)  # first: the lists that scale later work
    prompt_ids = prompt_ids_of(record)
    if prompt_ids is not None:
        check_ids(prompt_ids, model, "prompt_token_ids")
    if record.prompt_tokens is not None and record.prompt_tokens < 0:
        raise DerenderError("prompt_tokens must not be negative", param="prompt_tokens")
    # Responses and Messages run as chat requests (worker/core/apis/).
    formatted = api in apis.FORMATS
    opts = _options(req, "chat" if formatted else api, model)
    created = record.created
    if created is None:
        created = timestamp_ms // 1000 if timestamp_ms is not None else 0
    state = RequestState(
        seq=record.seq,
        api=api,
        model=model.name,
        created=created,
        prompt_tokens=(
            record.prompt_tokens
            if record.prompt_tokens is not None
            else (len(prompt_ids) if prompt_ids is not None else None)
        ),
        opts=opts,
        reply_partition=record.reply_partition,
    )
    if formatted:
        apis.open_format(state, record, req)
    raw = RequestTables()
    if req is not None:
        raw.stop = normalize_stop(req.stop)
        raw.stop_token_ids = list(req.stop_token_ids or ())
    if api != "completion":
        template = model.parser.open(req, prompt_ids, record.request_id, with_tools=False)
        if template is not None:
            state.parser = template
            # The tools the parser reads go into the tables, not the choices' states
            # (built once per distinct tools JSON: an agent's requests share them).
            if req is not None and tools_json:
                raw.tools = registry.tables.tool_schemas(model.parser, template, req, tools_json)
            # The parser reads its markers in the text: special tokens stay in (it drops
            # the specials that are not markers itself, as vLLM's parsers do).
            opts.skip_special_tokens = False
    tables = registry.tables.of(raw)
    state.tables = tables.digest
    state.seed = model.detokenizer(opts.skip_special_tokens).seed(prompt_ids)
    return state, tables


def request_of(record: ChunkRecord, api: str) -> ChatRequest | None:
    """The OpenAI request the seq-0 record carries, for the API it is served as (a
    Responses or Messages request as the chat request it runs as)."""
    if api in apis.FORMATS:
        return apis.chat_request(record, api)
    req = record.chat_request if api == "chat" else record.completion_request
    if req is None:  # the other flavour's request is still the request
        req = record.completion_request if api == "chat" else record.chat_request
    return req


def prompt_ids_of(record: ChunkRecord) -> list[int] | None:
    """The rendered prompt's ids: on the record, else on its first generate chunk."""
    prompt_ids = record.prompt_token_ids
    if prompt_ids is None and record.generate_chunk is not None:
        prompt_ids = record.generate_chunk.prompt_token_ids
    return prompt_ids


def _options(req: ChatRequest | None, api: str, model: Model) -> Options:
    if req is None:
        return Options(no_request=True)
    so = req.stream_options
    include_usage = bool(so and so.include_usage)
    if api == "chat":
        logprobs = bool(req.logprobs)
        top = req.top_logprobs or 0
    else:
        # Completion: `logprobs: k` asks for k top candidates (0 = only the sampled one).
        lp = req.logprobs
        logprobs = lp is not None and lp is not False
        top = 0 if isinstance(lp, bool) or lp is None else lp
    check_options(top, req.n, model)
    echo = api == "completion" and req.echo
    return Options(
        skip_special_tokens=req.skip_special_tokens,
        include_stop_str_in_output=req.include_stop_str_in_output,
        include_usage=include_usage,
        # vLLM sends continuous usage only when include_usage is on as well.
        continuous_usage_stats=include_usage and bool(so and so.continuous_usage_stats),
        n=req.n,
        logprobs=logprobs,
        top_logprobs=top,
        include_reasoning=req.include_reasoning,
        echo=echo,
        hide_output=echo and req.max_tokens == 0,
    )
