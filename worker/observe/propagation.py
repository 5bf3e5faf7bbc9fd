"""Which input headers travel onto the records an input record produced
(docs/integrate/contract.md, "Headers").

The W3C trace context (`traceparent`, `tracestate`) and `baggage` always; plus the
headers a deployment names with `--pass-headers` (a tenant id it routes by). Sources
keep only these (`carried`), once per input record and only when it has headers at all,
so a record without headers costs one truthiness check; `pipeline` appends them to every
output, error, control record and dead letter the record produced.

Pure: no OpenTelemetry here (that is `worker/observe/tracing.py`, an optional extra).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
BAGGAGE = "baggage"
# W3C Trace Context and W3C Baggage: the headers every OpenTelemetry SDK propagates.
TRACE_HEADERS = frozenset((TRACEPARENT, TRACESTATE, BAGGAGE))

# What a source keeps of an input record's headers: (name, value) pairs in their order.
Carried = tuple[tuple[str, bytes], ...]

# A header name a deployment may pass: an HTTP token (RFC 9110 §5.6.2), which is what
# gateways and Kafka Connect's HTTP sinks can turn into an HTTP header again.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Our own headers (derender-kind, -seq, …): passing an input's copy of one would put two
# of them on an output and break every consumer's dedupe.
_OWN_PREFIX = "derender-"


def pass_header_names(raw: str | None) -> frozenset[str]:
    """`--pass-headers a,b` → {"a", "b"}; ValueError for a name that cannot be passed."""
    if raw is None or not raw.strip():
        return frozenset()
    names = [n.strip() for n in raw.split(",")]
    for n in names:
        if not n:
            raise ValueError(f"--pass-headers: an empty name in {raw!r}")
        if not _TOKEN.fullmatch(n):
            raise ValueError(f"--pass-headers: {n!r} is not a header name (an HTTP token)")
        if n.lower().startswith(_OWN_PREFIX):
            raise ValueError(f"--pass-headers: {n!r} is the worker's own header")
    return frozenset(names)


def carried_names(pass_headers: str | None) -> frozenset[str]:
    """Every header name the outputs carry: the trace headers and `--pass-headers`."""
    return TRACE_HEADERS | pass_header_names(pass_headers)


def carried(headers: Iterable[tuple[str, bytes | None]], names: frozenset[str]) -> Carried | None:
    """The headers of `names` among an input record's (None when there are none). Call it
    only when the record has headers: most have none, and then the check is all it costs.
    A header without a value (Kafka allows null) is not carried."""
    kept: list[tuple[str, bytes]] | None = None  # (most records carry none: nothing built)
    for k, v in headers:
        if k in names and v is not None:
            if kept is None:
                kept = [(k, v)]
            else:
                kept.append((k, v))
    return tuple(kept) if kept else None
