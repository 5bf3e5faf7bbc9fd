"""What a run measures: the positions and windows of part A, its target, the repeats
(`Profile`), and the msgpack codecs every timed path uses."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from worker.core.parsers import (
    ParserState,
)
from worker.core.state import ChoiceState

TARGET_RATIO = 1.5  # issues #4, #12: per-chunk cost at token 10,000 ≤ 1.5 × at token 100
EARLY, LATE = 100, 10_000  # the two positions compared
WINDOW = 256  # records timed at each position (one token each)
REPLAY_WINDOW = 8  # records timed for the replay baseline (it is slow late)

state_decoder = msgspec.msgpack.Decoder(ParserState)
choice_decoder = msgspec.msgpack.Decoder(ChoiceState)
msgpack_encoder = msgspec.msgpack.Encoder()


@dataclass(frozen=True)
class Profile:
    repeats: int  # part A: per row and pass (round robin between the two positions)
    rounds: int  # part A: passes over the whole table
    throughput_repeats: int


FULL = Profile(repeats=11, rounds=3, throughput_repeats=15)
QUICK = Profile(repeats=3, rounds=1, throughput_repeats=1)
