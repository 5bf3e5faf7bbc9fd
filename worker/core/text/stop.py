"""Stop strings and stop tokens, applied by the worker (the engine has no tokenizer).

Streaming rule: text is released as soon as it can no longer become part of a stop
string; only the longest tail that is a proper prefix of some stop string is held
(vLLM's engine holds `max(len(stop)) - 1` characters; holding less is exact and
lower-latency). When a stop string completes, the text before it (or through it, with
`include_stop_str_in_output`) is the choice's last text. The stop string that completes
first fires (what an engine checking after every token would see); ties between strings
ending at the same place go to the earlier one in the request's list.

Matching: a request's stop strings are compiled once into a `StopStrings` (the caller
keeps it per distinct list), and a record then costs time proportional to the held text
plus the new text, flat in the number of stop strings. Checking every stop string on
every record, a `str.find` and a suffix loop per string, costs milliseconds a record with
10,000 strings of 100 characters (and ~100 ms once a long prefix is held): a hostile
request would stall its whole partition. A few short strings are still checked that way,
in C; more, or longer ones, go through an Aho–Corasick automaton, one step per character.
It is compiled from the sorted strings with array copies, not a Python step per
character, and its failure links are filled in as scans first reach them, so compiling a
hostile list is cheap too (10,000 strings of 100 characters: ~0.2 s, ~22 MB) and the work
ever spent on links stays within what an eager build would spend.
"""

from __future__ import annotations

import functools
import sys
from array import array
from collections.abc import Sequence

# The `str.find` path: at most 8 strings, none longer than 64 characters. It costs, per
# string, a C scan of the buffer and, for the held tail, one slice-and-compare per place
# the string's first character occurs in the buffer's last `len(stop) - 1` characters;
# the automaton costs a Python step per character (~0.1-0.3 µs). On a short streaming
# record the two are even with a few strings (a few µs either way); on a long one, as a
# whole response decoded in one call, a few C scans win by far (10,000 characters, 8
# strings: ~60 µs against ~1 ms). Capping the count keeps that cost flat (8 scans at
# most); capping the length bounds the held-tail worst case, text made of the strings'
# first character (8 × 63 compares, ~0.3 ms), where the automaton stays linear.
_FIND_MAX_COUNT = 8
_FIND_MAX_LEN = 64

# Node numbers, depths and code points (at most 0x10FFFF) in 32-bit arrays; a run's code
# points are copied in as UTF-32 in the arrays' byte order.
_I32 = "i"
_UTF32 = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"
if array(_I32).itemsize != 4:  # a C int is 4 bytes on every platform CPython supports
    raise ImportError("worker.core.text.stop needs 4-byte array('i') items")
_EDGE = 0x110000  # one past the largest code point: `node * _EDGE + ord(char)` keys an edge
_UNKNOWN = -2  # a failure link or an output not computed yet
_NONE = -1  # no output: no stop string ends at the node


def normalize_stop(stop: str | Sequence[str] | None) -> list[str]:
    """`None` → [], a string → [it] unless empty, a list → its non-empty items."""
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop] if stop else []
    return [s for s in stop if s]


class StopStrings:
    """A request's stop strings, compiled once (Aho-Corasick for many, str.find for a few).

    `apply` keeps no state between calls: the streaming state is the held text, which the
    caller passes back. The automaton's lazily filled tables are a cache, the same for
    every caller, so one `StopStrings` may serve every choice using the same list.
    """

    __slots__ = (
        "_char",
        "_depth",
        "_edges",
        "_fail",
        "_heads",
        "_next",
        "_out",
        "_own",
        "automaton",
        "longest",
        "stops",
    )

    stops: tuple[str, ...]
    longest: int
    automaton: bool  # which path `apply` takes: the automaton, or `str.find` per string

    def __init__(self, stops: Sequence[str]) -> None:
        """`stops` already normalized (non-empty strings, in the request's order)."""
        self.stops = tuple(stops)
        self.longest = max(map(len, self.stops), default=0)
        self.automaton = len(self.stops) > _FIND_MAX_COUNT or self.longest > _FIND_MAX_LEN
        # The trie. Nodes are numbers (0 is the root), and a stop string's fresh tail is a
        # run of consecutive ones, each the child of the one before: per node, the code
        # point on the edge into it, its depth, the code point on the edge to node + 1
        # when that is its child (-1 if not), its failure link and its output (the
        # request index of the earliest-listed stop string ending there as a suffix),
        # both _UNKNOWN until needed. `_heads` holds each run's first node and its parent,
        # `_edges` the edge into it (as `parent * _EDGE + code point`), `_own` the
        # request index of the string a node spells, if any (the first of duplicates).
        self._char = array(_I32, [-1])
        self._depth = array(_I32, [0])
        self._next = array(_I32, [-1])
        self._heads: dict[int, int] = {}
        self._edges: dict[int, int] = {}
        self._own: dict[int, int] = {}
        if self.automaton:
            self._build()
        self._fail = array(_I32, [_UNKNOWN]) * len(self._depth)
        self._fail[0] = 0
        self._out = array(_I32, [_UNKNOWN]) * len(self._depth)
        self._out[0] = self._own.get(0, _NONE)

    def __bool__(self) -> bool:
        return bool(self.stops)

    def __repr__(self) -> str:
        path = "automaton" if self.automaton else "find"
        return f"StopStrings({len(self.stops)} strings, longest {self.longest}, {path})"

    def apply(
        self, held: str, text: str, include: bool, final: bool
    ) -> tuple[str, str, str | None]:
        """Run new text through the stop check.

        Returns (text to emit, text still held, the stop string that fired or None).
        `final` means the choice ends with this text, so nothing is held.
        """
        if not self.stops:
            return held + text, "", None
        buf = held + text if held else text
        if self.automaton:
            end, found = self._scan(buf)
            if end >= 0:
                s = self.stops[found]
                return buf[: end if include else end - len(s)], "", s
            keep = found  # nothing fired: `found` is the held tail's length
        else:
            hit = _find_first(buf, self.stops)
            if hit is not None:
                start, end, s = hit
                return buf[: end if include else start], "", s
            keep = 0 if final else _held_tail(buf, self.stops)
        if final or keep == 0:
            return buf, "", None
        return buf[:-keep], buf[-keep:], None

    # -- the automaton -------------------------------------------------------------------

    def _build(self) -> None:
        """The trie, from the distinct strings in sorted order: a string shares with the
        trie exactly its common prefix with the previous one, so its fresh tail is one run
        of new nodes, appended with array copies rather than a step per character."""
        first: dict[str, int] = {}
        for i, s in enumerate(self.stops):
            first.setdefault(s, i)
        char, depth, nxt = self._char, self._depth, self._next
        heads, edges, own = self._heads, self._edges, self._own
        ramp = array(_I32, range(self.longest + 1))
        path = [0]  # path[d]: the node of the previous string's first d characters
        prev = ""
        for s in sorted(first):
            if not s:  # not from `normalize_stop`; fires at once, as `"".find` would
                own[0] = first[s]
                continue
            shared = _common_prefix(prev, s)  # < len(s): a prefix sorts before
            node, top = len(depth), path[shared]
            heads[node] = top
            edges[top * _EDGE + ord(s[shared])] = node
            char.frombytes(s[shared:].encode(_UTF32, "surrogatepass"))
            nxt.extend(char[node + 1 :])
            nxt.append(-1)
            depth.extend(ramp[shared + 1 : len(s) + 1])
            del path[shared + 1 :]
            path.extend(range(node, len(depth)))
            own[len(depth) - 1] = first[s]
            prev = s

    def _scan(self, buf: str) -> tuple[int, int]:
        """Feed `buf` from the root: (end, request index) of the first stop string to
        complete, or (-1, depth of the last node) — the longest suffix of `buf` that is a
        prefix of some stop string, a proper one since none completed."""
        out = self._out
        if out[0] >= 0:
            return 0, out[0]
        nxt, edge, fail, none = self._next, self._edges.get, self._fail, _NONE
        node = 0
        for i, c in enumerate(map(ord, buf)):
            while True:
                if nxt[node] == c:
                    node += 1
                    break
                child = edge(node * _EDGE + c)
                if child is not None:
                    node = child
                    break
                if node == 0:
                    break
                up = fail[node]
                node = up if up >= 0 else self._fail_of(node)
            found = out[node]
            if found != none:
                if found == _UNKNOWN:
                    found = self._out_of(node)
                if found >= 0:
                    return i + 1, found
        return -1, self._depth[node]

    def _fail_of(self, node: int) -> int:
        """The failure link of `node`: the longest proper suffix of its string that is a
        node — the child on its character of the deepest node on its parent's failure
        chain that has one, or the root.

        The links needed here are known in practice: a scan enters a node from the node
        it was at or one on that node's failure chain, whose outputs, so links, it has
        filled in, and a link's target has for parent a node on the failure chain of the
        linking node's parent. The fallback (computing a link that is not known) only
        keeps a missing one from ever being read as a node.
        """
        fail, nxt, edge = self._fail, self._next, self._edges.get
        parent = self._heads.get(node, node - 1)
        link = 0
        if parent != 0:
            c = self._char[node]
            f = fail[parent] if fail[parent] >= 0 else self._fail_of(parent)
            while True:
                if nxt[f] == c:
                    link = f + 1
                    break
                child = edge(f * _EDGE + c)
                if child is not None:
                    link = child
                    break
                if f == 0:
                    break
                f = fail[f] if fail[f] >= 0 else self._fail_of(f)
        fail[node] = link
        return link

    def _out_of(self, node: int) -> int:
        """The output of `node`: the earliest-listed of its own stop string and the
        output of its failure link, filled in along the failure chain."""
        out, fail, own = self._out, self._fail, self._own
        chain: list[int] = []
        while out[node] == _UNKNOWN:
            chain.append(node)
            up = fail[node]
            node = up if up >= 0 else self._fail_of(node)
        found = out[node]
        for n in reversed(chain):
            mine = own.get(n, _NONE)
            if mine >= 0 and (found < 0 or mine < found):
                found = mine
            out[n] = found
        return found


NO_STOPS = StopStrings(())


def _find_first(buf: str, stops: Sequence[str]) -> tuple[int, int, str] | None:
    """The stop string that completes first in `buf`: (start, end, stop) or None."""
    best: tuple[int, int, str] | None = None
    for s in stops:
        at = buf.find(s)
        if at >= 0 and (best is None or at + len(s) < best[1]):
            best = (at, at + len(s), s)
    return best


def _held_tail(buf: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of `buf` that is a proper prefix of a stop string:
    for each string, the first place (so the longest suffix) where its first character
    starts a suffix longer than the best so far that the string starts with."""
    size = len(buf)
    longest = 0
    for s in stops:
        upto = min(len(s) - 1, size)
        if upto <= longest:
            continue
        first = s[0]
        at = buf.find(first, size - upto)
        while 0 <= at < size - longest:
            if s.startswith(buf[at:]):
                longest = size - at
                break
            at = buf.find(first, at + 1)
    return longest


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of `a` and `b`, by bisection (C compares)."""
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo]; the answer is at most hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if b.startswith(a[lo:mid], lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


@functools.lru_cache(maxsize=16)
def _compiled(stops: tuple[str, ...]) -> StopStrings:
    return StopStrings(stops)


def apply_stop(
    held: str, text: str, stops: Sequence[str], include: bool, final: bool
) -> tuple[str, str, str | None]:
    """Compatibility: `StopStrings(stops).apply(held, text, include, final)`, compiled
    once per distinct list (the last 16 kept). New code keeps its own `StopStrings`."""
    return _compiled(tuple(stops)).apply(held, text, include, final)
