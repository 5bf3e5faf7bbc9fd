"""Per-request state: plain data that round-trips through msgpack (Redis, or memory).

`gc=False`: these trees of lists, strings and numbers can never form a reference cycle,
so the garbage collector need not track them (halves the state's decode time).
`array_like` drops field names from the encoding, so a plain request costs a few dozen
bytes. (msgspec writes every field of an `array_like` Struct, defaults included:
`omit_defaults` does not shorten the array, so each new field costs about a byte in every
state.) Evolution rule (msgspec): new fields go at the end of a Struct and have
defaults, so older blobs (shorter arrays) still decode; `v` is bumped only when a field
changes meaning.
"""

from __future__ import annotations

import msgspec

from worker.core.parsers.language.state import ParserState

# 2: a parser call in progress is a tagged union (parsers/state.py); a v1 blob holding one
# fails to decode and its request ends as state_corrupt, never misread.
STATE_VERSION = 2

# RequestState.status
ACTIVE = 0
FAILED = 1  # a bad record failed the request; later records are consumed silently
DONE = 2  # `end`/`abort` applied; kept briefly as a tombstone so redeliveries dedupe


class Options(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """The request parameters that shape the output, taken from the seq-0 record.

    `stop` and `stop_token_ids` are empty in states written since the request's tables
    (core/tables.py) hold them; an older state's lists are read from here."""

    skip_special_tokens: bool = True
    stop: list[str] = []
    stop_token_ids: list[int] = []
    include_stop_str_in_output: bool = False
    include_usage: bool = False
    continuous_usage_stats: bool = False
    # True when the seq-0 record carried no request: engine usage events are forwarded.
    no_request: bool = False
    n: int = 1
    # Logprobs: 0 = off; chat: top_logprobs (0..k); completion: `logprobs` k; -1 = all.
    logprobs: bool = False
    top_logprobs: int = 0
    include_reasoning: bool = True
    # Completion `echo`: the prompt comes first. `echo_len` is the prompt text's length
    # (completion logprob offsets of the generated tokens start there); `hide_output` is
    # echo with `max_tokens: 0`: the engine's one generated token is not shown.
    echo: bool = False
    echo_len: int = 0
    hide_output: bool = False


class ChoiceState(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """Decoding state of one choice index (`n > 1` interleaves several)."""

    index: int
    window: list[int] = []
    pending: list[int] = []
    held: str = ""  # text held back because it could still become a stop string
    role_sent: bool = False
    done: bool = False  # finished (engine finish or stop string): later tokens say nothing
    tokens: int = 0  # completion tokens seen for this choice
    # Completion logprobs `text_offset` of the next token: continues across records.
    text_offset: int = 0
    # Reasoning / tool-call parser of this choice (None: plain text, no parser).
    parser: ParserState | None = None


class FormatState(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """Where a Responses or Messages stream stands (worker/core/apis/): the request runs
    as a chat request, and its format turns choice 0's pieces into that API's events.

    Small and fixed-size but for `text` and `items`: the Responses API repeats the whole
    text of an item in its `.done` events and every item in `response.completed`, so
    those are kept, bounded by `max_output_bytes` (`held` counts them: the check is one
    comparison). Messages keeps neither."""

    opened: bool = False  # the stream's opening events are out
    seq: int = 0  # the next event's `sequence_number` (Responses)
    kind: int = 0  # the open item or block: apis.NONE, REASONING, TEXT, CALL
    index: int = 0  # its output_index / block index; with none open, the next one's
    call: int = -1  # the chat tool-call index of the open call
    call_id: str = ""  # the open call's id and name
    name: str = ""
    text: str = ""  # the open item's text or arguments so far (Responses)
    items: list[bytes] = []  # every closed item's JSON, in order (Responses)
    held: int = 0  # the bytes of `text` and `items`
    finish: str = ""  # choice 0's finish_reason, once it came ("": not yet)
    stop: int | str | None = None  # its stop_reason
    # The request fields the API's response object repeats, as JSON (Responses: tool
    # choice, parallel tool calls, max_output_tokens, temperature, top_p).
    echo: bytes = b""


class RequestState(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    seq: int  # the last applied record's seq
    status: int = ACTIVE
    api: str = "chat"
    model: str = ""
    created: int = 0
    prompt_tokens: int | None = None
    seed: list[int] = []  # first decode window of every new choice (prompt tail)
    opts: Options = msgspec.field(default_factory=Options)
    choices: list[ChoiceState] = []
    usage_sent: bool = False
    v: int = STATE_VERSION
    # The parser state every new choice starts from (opened from the seq-0 record,
    # which later choices of `n > 1` no longer see); None: no parser path.
    parser: ParserState | None = None
    # The digest of the request's tables (stop strings, stop ids, tools: core/tables.py),
    # stored once beside the state; b"" when the request has none.
    tables: bytes = b""
    # A chat stream's opening is out: one role chunk per choice, 0…n−1 (stream.py).
    # False in a state written before the opening existed: that stream keeps sending
    # each choice's role with its first text, as it began.
    opened: bool = False
    # The output topic's partition the request's outputs go to (its seq-0 record's
    # `reply_partition`); None: the key's partition, as for a state written before it.
    reply_partition: int | None = None
    # `api` "responses" / "messages": the format's state (None for chat and completion).
    fmt: FormatState | None = None

    def choice(self, index: int) -> ChoiceState | None:
        for c in self.choices:
            if c.index == index:
                return c
        return None


class CorruptState(msgspec.Struct, frozen=True, gc=False):
    """The store's verdict that a request's blob does not decode (`load_state`).

    Passed to `step` in place of the state: the request fails with `state_corrupt`.
    `reason` is msgspec's message, for the shell's log; it is not in any output.
    """

    reason: str = ""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(RequestState)

# What msgspec raises for a state msgpack cannot hold: an integer past 64 bits (msgspec's
# JSON decoder takes integers of any size: `created`, `n`, a choice `index`, …).
UNSTORABLE = (OverflowError, msgspec.EncodeError)


# `encode_state(state) -> bytes`: the encoder's own method, not a function around it (a
# Python frame less per record). Raises one of UNSTORABLE for a state msgpack cannot hold.
encode_state = _encoder.encode


def decode_state(blob: bytes) -> RequestState:
    """Raises msgspec.DecodeError / ValidationError for a corrupt blob."""
    return _decoder.decode(blob)


def load_state(blob: bytes | None) -> RequestState | CorruptState | None:
    """A stored blob as `step` takes it: None (nothing stored), the state, or the verdict
    that it is corrupt."""
    if blob is None:
        return None
    try:
        return _decoder.decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return CorruptState(str(exc))
