"""Stop strings and stop tokens, applied by the worker (the engine has no tokenizer).

Streaming rule: text is released as soon as it can no longer become part of a stop
string; only the longest tail that is a proper prefix of some stop string is held
(vLLM's engine holds `max(len(stop)) - 1` characters; holding less is exact and
lower-latency). When a stop string completes, the text before it (or through it, with
`include_stop_str_in_output`) is the choice's last text.
"""

from __future__ import annotations

from collections.abc import Sequence


def normalize_stop(stop: str | Sequence[str] | None) -> list[str]:
    """`None` → [], a string → [it] unless empty, a list → its non-empty items."""
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop] if stop else []
    return [s for s in stop if s]


def find_stop(text: str, stops: Sequence[str]) -> tuple[int, int, str] | None:
    """The stop string that completes first in `text`: (start, end, stop) or None.

    "Completes first" is what an engine checking after every token would see; ties
    go to the earlier string in the request's list.
    """
    best: tuple[int, int, str] | None = None
    for s in stops:
        at = text.find(s)
        if at >= 0:
            end = at + len(s)
            if best is None or end < best[1]:
                best = (at, end, s)
    return best


def held_tail(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
    longest = 0
    for s in stops:
        upto = min(len(s) - 1, len(text))
        for n in range(upto, longest, -1):
            if text.endswith(s[:n]):
                longest = n
                break
    return longest


def apply_stop(
    held: str, text: str, stops: Sequence[str], include: bool, final: bool
) -> tuple[str, str, str | None]:
    """Run new text through the stop check.

    Returns (text to emit, text still held, the stop string that fired or None).
    `final` means the choice ends with this text, so nothing is held.
    """
    if not stops:
        return held + text, "", None
    buf = held + text if held else text
    hit = find_stop(buf, stops)
    if hit is not None:
        start, end, s = hit
        return buf[: end if include else start], "", s
    if final:
        return buf, "", None
    keep = held_tail(buf, stops)
    if keep == 0:
        return buf, "", None
    return buf[:-keep], buf[-keep:], None
