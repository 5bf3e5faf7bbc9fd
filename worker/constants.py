"""The worker's shared words, each once, with why it is what it is.

Everything here is part of a contract someone else reads (the output topic's headers, the
state keys in Redis, the environment) or a name two modules must agree on. A leaf module:
it imports nothing from the worker.
"""

from __future__ import annotations

# -- output records (docs/integrate/contract.md, "Output records") -------------------------
# Every output carries these headers: (request_id, seq, part) is the dedupe key a consumer
# uses after a redelivery, so renaming one breaks every consumer downstream.
H_REQUEST_ID = "derender-request-id"
H_SEQ = "derender-seq"
H_PART = "derender-part"
H_KIND = "derender-kind"
# Dead letters carry why and where from (file:line or topic/partition/offset).
H_ERROR = "derender-error"
H_SOURCE = "derender-source"
# `derender-seq` of the outputs for a record whose seq could not be read.
UNKNOWN_SEQ = "-1"

# Output kinds (the `derender-kind` header). The core produces the first four; a dead
# letter is the shell's.
CHUNK = "chunk"
RESPONSE = "response"
ERROR = "error"
DONE_KIND = "done"
DLQ = "dlq"
# An early-stop request to the engine (`--control-topic`): the worker finished a request
# before its engine did (worker/core/records/control.py).
CONTROL = "control"
# The value of the last output of a stream, as OpenAI's SSE ends one (`data: [DONE]`).
DONE = b"[DONE]"

# Per-record results (the `result` label of derender_records_total).
OK = "ok"
DUPLICATE = "duplicate"
FAILED = "error"
SKIPPED = "skipped"  # consumed silently: the request had already failed or finished
RESULTS = (OK, DUPLICATE, FAILED, DLQ, SKIPPED)

# -- topics and the environment -----------------------------------------------------------
INPUT_TOPIC = "derender.chunks"
OUTPUT_TOPIC = "derender.deltas"
DLQ_TOPIC = "derender.dlq"
CONTROL_TOPIC = "derender.control"
GROUP_ID = "derender"
# Every flag `--some-flag` also reads DERENDER_SOME_FLAG (settings.FLAGS).
ENV_PREFIX = "DERENDER_"

# -- state in Redis (docs/integrate/contract.md, "State") -------------------------------------
# `derender:{<request_id>}`: the braces are a Redis Cluster hash tag, so a request's key
# lives in one slot whatever its id; `derender:epoch:<scope>` holds owner epochs.
KEY_PREFIX = "derender:"


def state_key(prefix: str, request_id: str) -> str:
    return f"{prefix}{{{request_id}}}"


def epoch_key(prefix: str, scope: str) -> str:
    return f"{prefix}epoch:{scope}"


# -- the batch loop -----------------------------------------------------------------------
# Stages of one batch, in order (docs/design/batch-loop.md, "The steps"; loop.run_batch's).
STAGES = ("decode", "redis_load", "core", "produce", "redis_save", "commit")

# The largest `seq` accepted (int64, what any publisher's counter fits in). msgspec's JSON
# decoder accepts integers of any size, but states are stored as msgpack (at most 2**64 - 1).
MAX_SEQ = 2**63 - 1

# A record larger than this is refused before it is parsed (docs/integrate/contract.md, "Bounds").
# Kafka's default max.message.bytes is 1 MiB; a whole non-streaming response with
# logprobs can be larger, so the default leaves headroom. Configurable.
DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
# Every output becomes one broker record. Kafka refuses one over the topic's
# `max.message.bytes` (1,048,588 bytes by default) or the producer's `max.request.size`
# (1 MiB), both counted with the record's key, headers and batch overhead: 1,000,000
# bytes of value leaves room for those.
DEFAULT_MAX_OUTPUT_BYTES = 1_000_000
# Bounds on the request's lists that scale work (docs/integrate/contract.md, "Bounds"),
# checked when a request opens, before any tokenizer work. The stop-string matcher and the
# tool table are built once per distinct list (core/tables.py) and cost a record the same
# whatever their size, so these bound the one-off compilation and the memory, not the
# per-record cost: 256 × 256 characters is a 65,536-node automaton at most (≈ 40 ms to
# build); OpenAI takes 4 stop strings, vLLM any number. 1,024 tools (an agent with several
# MCP servers has a few hundred) and 1 MiB of tool JSON; 1,024 stop token ids.
DEFAULT_MAX_STOP_STRINGS = 256
DEFAULT_MAX_STOP_LENGTH = 256
DEFAULT_MAX_STOP_TOKEN_IDS = 1024
DEFAULT_MAX_TOOLS = 1024
DEFAULT_MAX_TOOLS_BYTES = 1 << 20

# How long a live request's state survives without a new record (docs/integrate/contract.md,
# "State").
DEFAULT_TTL_S = 3600
# How long a finished request's tombstone is kept: long enough that a redelivery after
# a crash (at most one uncommitted batch, or a rebalance) is recognised as a duplicate.
DEFAULT_DONE_TTL_S = 600
