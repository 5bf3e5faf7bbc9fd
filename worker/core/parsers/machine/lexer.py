"""Marker matching: which markers each state looks for, found on text with the suffix
that could still become one held back, or found by token id.

Markers that are single added tokens are matched by id when ids are known (so the same
literal written as ordinary tokens is text); every other marker is matched on text by a
leftmost-longest regex per state. What may be held is at most the longest marker of the
state, so a chunk costs its own length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from worker.core.parsers.language.grammar import N_STATES, Table


class Lexer(NamedTuple):
    """The text markers of one state: a leftmost-longest regex and what to hold back."""

    pattern: re.Pattern[str]
    prefixes: frozenset[str]  # proper prefixes of the markers (hold-back candidates)
    firsts: frozenset[str]  # first characters of the markers (hold-back fast path)
    longest: int  # longest prefix that can be held
    extendable: frozenset[str]  # markers that are prefixes of longer ones: wait on them


def lexer(literals: Iterable[str]) -> Lexer | None:
    lits = sorted(set(literals), key=lambda s: (-len(s), s))
    if not lits:
        return None
    return Lexer(
        re.compile("|".join(re.escape(s) for s in lits)),
        frozenset(s[:k] for s in lits for k in range(1, len(s))),
        frozenset(s[0] for s in lits),
        max(len(s) for s in lits) - 1,
        frozenset(s for s in lits if any(o != s and o.startswith(s) for o in lits)),
    )


@dataclass(frozen=True, slots=True)
class Machine:
    """One compiled transition table with its per-state lexers."""

    transitions: Table
    # Per state: the markers matched on text when token ids are known (markers that
    # are single tokens are matched by id instead), and when they are not.
    lex_ids: tuple[Lexer | None, ...]
    lex_text: tuple[Lexer | None, ...]


def machine(table: Table, token_markers: set[str]) -> Machine:
    by_state: list[set[str]] = [set() for _ in range(N_STATES)]
    for state, marker in table:
        by_state[state].add(marker)
    return Machine(
        table,
        tuple(lexer(m - token_markers) for m in by_state),
        tuple(lexer(m) for m in by_state),
    )


def holdback(
    lx: Lexer | None,
    buf: str,
    i: int,
    end: int,
    pending: list[int],
    marker_text: Mapping[int, str],
) -> int:
    """How much of `buf[i:end]`'s end could still become a marker: one of `lx`'s, or
    the text of a marker token that a hold-back upstream split (`pending`, their ids)."""
    held = 0
    if lx is not None:
        lo = max(i, end - lx.longest)
        for first in lx.firsts:  # usually one or two characters, e.g. "<"
            k = buf.find(first, lo, end)
            while k >= 0 and end - k > held:
                if buf[k:end] in lx.prefixes:
                    held = end - k  # the earliest start is the longest hold
                    break
                k = buf.find(first, k + 1, end)
    for token_id in pending:
        literal = marker_text[token_id]
        for k in range(max(i, end - len(literal) + 1), end - held):
            if literal.startswith(buf[k:end]):
                held = end - k
                break
    return held


def locate(buf: str, pos: int, literal: str, need: int) -> int:
    """Where a marker token's text is: the first of the last `need` occurrences.

    Occurrences beyond what the marker ids account for are the same literal written as
    ordinary tokens (plain text); the real markers are taken to be the later ones.
    """
    at = buf.find(literal, pos)
    if at < 0:
        return -1
    surplus = buf.count(literal, pos) - need
    while surplus > 0:
        at = buf.find(literal, at + len(literal))
        surplus -= 1
    return at
