"""`serve`'s differences at the HTTP level: documented, pinned by tests/serve, never a body
diff of the parity tests.

Imports nothing of the project but its other `differences_*` modules: it is read by a
test that runs without vLLM or httpx.
"""

from __future__ import annotations

from typing import Any

from tests.peer.differences.differences_base import Difference


def _http_only(case: Any, diff: Any) -> bool:
    """`serve`'s differences at the HTTP level (the carried state, its binding, body
    limits, messages, null fields): tests/serve pins them; the body parities compare
    after the normalisation that makes them vanish, so no body diff is explained here."""
    return False


SERVE: list[Difference] = [
    Difference(
        "serve-stream-state", "serve: stream_state is our sealed request state (~200 B)", _http_only
    ),
    Difference(
        "serve-state-bound", "serve: a state of another request, or altered: 400", _http_only
    ),
    Difference(
        "serve-null-fields", "serve: fields vLLM writes as null / [] are left out", _http_only
    ),
    Difference(
        "serve-created", "serve: a stream's chunks carry its first call's `created`", _http_only
    ),
    Difference("serve-body-limit", "serve: a body over --max-body-bytes is a 413", _http_only),
    Difference(
        "serve-stream-bound", "serve: the chunk and the prompt bounded, not their sum", _http_only
    ),
    Difference(
        "serve-error-messages", "serve: the core's error messages, msgspec's validation", _http_only
    ),
    Difference("serve-empty-chunk", "serve: a call with nothing to say: delta {}", _http_only),
    Difference("serve-models", "serve: /v1/models card root is the served name", _http_only),
]
