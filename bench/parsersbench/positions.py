"""Part A: the per-chunk cost of parsing at token 100 and at token 10,000, ours
(state round trip, `feed`, delta) beside vLLM's re-parse of everything so far."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from common import (  # bench/common.py (the script's folder is on sys.path)
    timed_round_robin,
)

from parsersbench.formats import ARGS, CONTENT, REASONING, Format, Stream, format_stream
from parsersbench.profile import (
    EARLY,
    LATE,
    REPLAY_WINDOW,
    WINDOW,
    Profile,
    msgpack_encoder,
    state_decoder,
)
from worker.core.parsers import (
    Content,
    Reasoning,
    ToolCallArgs,
    ToolCallStart,
    feed,
    parse_whole,
    to_delta,
)
from worker.wire import outbound as out

# -- A. per-chunk cost at two positions -----------------------------------------------------


def state_at(s: Stream, position: int) -> bytes:
    st = s.open()
    for k in range(position):
        feed(s.spec, st, s.texts[k], [s.ids[k]])
    return msgpack_encoder.encode(st)


def window_ours(s: Stream, blob: bytes, start: int, n: int) -> Callable[[], object]:
    def run() -> None:
        state = blob
        for k in range(start, start + n):
            st = state_decoder.decode(state)
            fed = feed(s.spec, st, s.texts[k], [s.ids[k]])
            delta = to_delta(fed.events)
            if delta is not None:
                out.encode(delta)
            state = msgpack_encoder.encode(st)

    return run


def window_replay(s: Stream, start: int, n: int) -> Callable[[], object]:
    """vLLM's streaming derender: every chunk re-parses all text so far."""

    def run() -> None:
        for k in range(start, start + n):
            st = s.open()
            parse_whole(s.spec, st, "".join(s.texts[: k + 1]), s.ids[: k + 1])

    return run


_PHASE_EVENT = {REASONING: Reasoning, ARGS: ToolCallArgs, CONTENT: Content}
_EVENT_NAME: dict[type, str] = {
    Reasoning: "reasoning",
    Content: "content",
    ToolCallStart: "call header",
    ToolCallArgs: "arguments",
}


def check_phase(s: Stream, phase: str, blob: bytes, start: int, n: int) -> str:
    """Empty when the window emits the phase's events and nothing else, else what it saw."""
    st = state_decoder.decode(blob)
    seen: dict[type, int] = {}
    for k in range(start, start + n):
        for ev in feed(s.spec, st, s.texts[k], [s.ids[k]]).events:
            seen[type(ev)] = seen.get(type(ev), 0) + 1
    want = _PHASE_EVENT[phase]
    if set(seen) == {want}:
        return ""
    got = ", ".join(f"{_EVENT_NAME[t]} ×{c}" for t, c in seen.items()) or "no events (held)"
    return f"at token {start}: {got}"


@dataclass
class PositionRow:
    fmt: Format
    what: str
    early_us: float
    late_us: float
    state_bytes: tuple[int, int]
    problem: str = ""  # the phase check's finding, if any

    @property
    def ratio(self) -> float:
        return self.late_us / self.early_us

    @property
    def ours(self) -> bool:
        return self.what.startswith("ours")


@dataclass
class Prepared:
    """A part A row ready to time: its stream and the states at both positions."""

    fmt: Format
    stream: Stream
    early: bytes
    late: bytes
    problem: str


def prepare(f: Format) -> Prepared:
    s = format_stream(f)
    if len(s.ids) < LATE + WINDOW:
        raise SystemExit(f"{f.family} {f.generation}: only {len(s.ids)} tokens")
    early, late = state_at(s, EARLY), state_at(s, LATE)
    problem = "; ".join(
        p
        for p in (
            check_phase(s, f.phase, early, EARLY, WINDOW),
            check_phase(s, f.phase, late, LATE, WINDOW),
        )
        if p
    )
    return Prepared(f, s, early, late, problem)


def per_position(preps: list[Prepared], prof: Profile) -> list[PositionRow]:
    """Every row timed in `prof.rounds` passes over the table, the best of all passes
    kept: a burst of other load then costs one pass of a row, not all its samples."""
    inf = float("inf")
    best = [[inf] * 4 for _ in preps]  # ours early, late; replay early, late
    for _ in range(prof.rounds):
        for p, b in zip(preps, best, strict=True):
            s = p.stream
            (oe, _), (ol, _) = timed_round_robin(
                [window_ours(s, p.early, EARLY, WINDOW), window_ours(s, p.late, LATE, WINDOW)],
                prof.repeats,
            )
            (re, _), (rl, _) = timed_round_robin(
                [window_replay(s, EARLY, REPLAY_WINDOW), window_replay(s, LATE, REPLAY_WINDOW)],
                max(1, prof.repeats // 3),
            )
            b[:] = [min(x, y) for x, y in zip(b, (oe, ol, re, rl), strict=True)]
    rows: list[PositionRow] = []
    for p, (oe, ol, re, rl) in zip(preps, best, strict=True):
        rows.append(
            PositionRow(
                p.fmt,
                "ours: state msgpack + feed + delta",
                oe / WINDOW * 1e6,
                ol / WINDOW * 1e6,
                (len(p.early), len(p.late)),
                p.problem,
            )
        )
        rows.append(
            PositionRow(
                p.fmt,
                "replay: parse_whole(text so far) per chunk",
                re / REPLAY_WINDOW * 1e6,
                rl / REPLAY_WINDOW * 1e6,
                (0, 0),
            )
        )
    return rows
