"""Token usage with checked arithmetic (reference/vllm-derender-contract.md §c.7)."""

from __future__ import annotations

from worker.core.errors import DerenderError
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
