"""Where the loop's answer differs from vLLM 0.32.0's coupled server on the same engine, on
purpose or because of the engine: each difference's id, the field of `oracle.View` it is
in, the cases it shows in, and what it looks like. The oracle test fails on any other
difference, and on one of these that no longer looks as said; a test keeps this list and
the table of docs/reference/parity.md ("vLLM 0.32.0's coupled server on a real engine") the
same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.e2e.loop import Options

# (the case's api, its client body, how the engine side treats it, streamed)
Where = Callable[[str, dict[str, Any], Options, bool], bool]
# (ours, the coupled server's, the token ids the engine generated for ours, where known)
Looks = Callable[[Any, Any, list[int] | None], bool]


@dataclass(frozen=True)
class Difference:
    id: str
    field: str
    where: Where
    looks: Looks


def _reasoning_details(ours: Any, theirs: Any, generated: list[int] | None) -> bool:
    details = (theirs or {}).get("completion_tokens_details") or {}
    return ours is None and details.get("reasoning_tokens") == 0


def _usage_of_generated(ours: Any, theirs: Any, generated: list[int] | None) -> bool:
    counted = ours["completion_tokens"]
    return (
        ours["prompt_tokens"] == theirs["prompt_tokens"]
        and counted > theirs["completion_tokens"]
        and (generated is None or counted == len(generated))
    )


def _prompt_logprobs_missing(ours: Any, theirs: Any, generated: list[int] | None) -> bool:
    """The coupled stream's logprobs are the prompt's, then ours."""
    cut = len(theirs["tokens"]) - len(ours["tokens"])
    return cut > 0 and all(theirs[k][cut:] == ours[k] for k in ours)


DIFFERENCES = [
    Difference(
        "reasoning-tokens-details",
        "usage_details",
        lambda api, body, options, stream: api == "chat",
        _reasoning_details,
    ),
    Difference(
        "worker-stop-usage",
        "usage",
        lambda api, body, options, stream: bool(body.get("stop")) and not options.engine_stop,
        _usage_of_generated,
    ),
    Difference(
        "echo-stream-prompt-logprobs",
        "logprobs",
        lambda api, body, options, stream: (
            api == "completion"
            and (stream or options.whole_from_stream)
            and bool(body.get("echo"))
            and bool(body.get("logprobs"))
        ),
        _prompt_logprobs_missing,
    ),
]


_ANTHROPIC_TYPES = {"invalid_request_error", "not_found_error", "api_error"}

DIFFERENCES.append(
    Difference(
        "messages-error-type",
        "error_type",
        lambda api, body, options, stream: api == "messages-error",
        lambda ours, theirs, generated: ours in _ANTHROPIC_TYPES and theirs.endswith("Error"),
    )
)


# The session's tally, printed by `make e2e`: comparisons made, and each difference seen.
TALLY: Counter[str] = Counter()


def expected(api: str, body: dict[str, Any], options: Options, stream: bool) -> list[Difference]:
    """The differences a case shows."""
    return [d for d in DIFFERENCES if d.where(api, body, options, stream)]
