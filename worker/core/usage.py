"""Token usage with checked arithmetic (vLLM 0.33.0 vllm/renderers/online_derenderer.py)."""

from __future__ import annotations

from worker.core.errors import DerenderError
from worker.core.state import RequestState
from worker.wire.outbound import UsageInfo

# Counters are unsigned 64-bit on the Rust side and in most consumers; a total past
# this is reported as an overflow instead of wrapping or losing precision.
TOKEN_COUNTER_MAX = 2**64 - 1


def usage(prompt_tokens: int, completion_tokens: int) -> UsageInfo:
    if prompt_tokens < 0 or completion_tokens < 0:
        raise DerenderError(
            f"token counts must not be negative (prompt_tokens={prompt_tokens}, "
            f"completion_tokens={completion_tokens})"
        )
    total = prompt_tokens + completion_tokens
    if total > TOKEN_COUNTER_MAX:
        raise DerenderError(
            f"prompt_tokens ({prompt_tokens}) + completion_tokens ({completion_tokens}) "
            "overflows the token counter"
        )
    return UsageInfo(prompt_tokens, completion_tokens, total)


def completion_tokens(state: RequestState) -> int:
    """The tokens generated so far, over every choice."""
    return sum(c.tokens for c in state.choices)


def request_usage(state: RequestState) -> UsageInfo:
    """The request's usage so far: its prompt and every choice's tokens."""
    # (completion_tokens, inlined: with continuous usage this runs on every chunk.)
    return usage(state.prompt_tokens or 0, sum(c.tokens for c in state.choices))
