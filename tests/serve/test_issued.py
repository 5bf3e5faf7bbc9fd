"""The states `serve` sealed last (stream_state.Issued): a state brought back byte for byte
is not opened again, and everything else is opened and checked as before."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest

from tests.serve.bodies import CHAT_REQUEST, REASONED, TOOLS, chunk_body
from worker.core.model import Registry
from worker.ports import Stored
from worker.serve.driver import Driver
from worker.serve.stream_state import BadState, Issued, Sealed, seal, unseal

KEY = b"k" * 64


def sealed(rid: str = "r1", seq: int = 3, blob: bytes = b"state", tables: bytes = b"") -> str:
    return seal(KEY, "chat", rid, seq, blob, tables).decode()


def test_a_state_brought_back_is_what_unseal_gives_without_opening_it() -> None:
    issued = Issued()
    text = sealed(tables=b"tables")
    issued.keep("chat", "r1", text, Stored(3, b"state", b"tables"))
    assert issued.open(KEY, "chat", "r1", text) == unseal(KEY, "chat", "r1", text)
    assert issued.hits == 1 and len(issued) == 0  # taken: the answer issues the next


def test_a_retried_call_opens_the_state_the_long_way() -> None:
    issued = Issued()
    text = sealed()
    issued.keep("chat", "r1", text, Stored(3, b"state"))
    first = issued.open(KEY, "chat", "r1", text)
    assert issued.open(KEY, "chat", "r1", text) == first == (Stored(3, b"state"), None)
    assert issued.hits == 1


@pytest.mark.parametrize(
    ("api", "rid", "text"),
    [
        ("chat", "r1", sealed(seq=4)),  # another state of the request (not the one issued)
        ("chat", "r2", sealed()),  # the text of another request
        ("completion", "r1", sealed()),  # the other endpoint
    ],
)
def test_anything_but_the_issued_text_for_that_request_is_checked(
    api: str, rid: str, text: str
) -> None:
    issued = Issued()
    issued.keep("chat", "r1", sealed(), Stored(3, b"state"))
    if (api, rid) == ("chat", "r1"):
        assert issued.open(KEY, api, rid, text).stored == Stored(4, b"state")  # older seal
    else:
        with pytest.raises(BadState):
            issued.open(KEY, api, rid, text)
    assert issued.hits == 0


def test_the_opened_choices_are_sealed_with_the_state() -> None:
    """The choices a stream_state opened ride in it, bound by its tag: a client cannot
    make a choice open twice by editing them; an envelope without them still opens."""
    text = seal(KEY, "chat", "r1", 3, b"state", b"", [0, 2]).decode()
    assert unseal(KEY, "chat", "r1", text) == (Stored(3, b"state"), [0, 2])
    issued = Issued()
    issued.keep("chat", "r1", text, Stored(3, b"state"), [0, 2])
    assert issued.open(KEY, "chat", "r1", text) == (Stored(3, b"state"), [0, 2])
    envelope = msgspec.msgpack.decode(base64.b64decode(text), type=Sealed)
    envelope.opened = [0]
    with pytest.raises(BadState):
        unseal(KEY, "chat", "r1", base64.b64encode(msgspec.msgpack.encode(envelope)).decode())
    assert unseal(KEY, "chat", "r1", sealed()).opened is None


def test_an_altered_state_is_refused_even_while_the_issued_one_is_held() -> None:
    issued = Issued()
    text = sealed()
    issued.keep("chat", "r1", text, Stored(3, b"state"))
    altered = text[:-4] + ("AAAA" if text[-4:] != "AAAA" else "BBBB")
    with pytest.raises(BadState):
        issued.open(KEY, "chat", "r1", altered)


def test_held_states_are_bounded_by_count_and_bytes() -> None:
    issued = Issued(size=3, max_bytes=10_000)
    for i in range(5):
        issued.keep("chat", f"r{i}", sealed(rid=f"r{i}"), Stored(3, b"state"))
    assert len(issued) == 3
    assert issued.open(KEY, "chat", "r4", sealed(rid="r4")) and issued.hits == 1
    assert issued.open(KEY, "chat", "r0", sealed(rid="r0")) and issued.hits == 1  # let go
    big = sealed(rid="big", tables=b"t" * 9_000)  # (its text alone is past max_bytes)
    issued.keep("chat", "big", big, Stored(3, b"state", b"t" * 9_000))
    assert len(issued) == 1 and issued._bytes == len(big) > issued.max_bytes
    assert issued.open(KEY, "chat", "big", big).stored.tables == b"t" * 9_000
    assert issued.hits == 2


def test_a_stream_through_the_driver_opens_no_state_it_issued(serve_registry: Registry) -> None:
    driver = Driver(serve_registry, key=KEY)
    state = None
    chat_request = dict(CHAT_REQUEST, tools=TOOLS)  # tables ride in the state
    for i, token in enumerate(REASONED):
        finish = "stop" if i == len(REASONED) - 1 else None
        body = chunk_body([token], state, rid="s1", finish=finish, chat_request=chat_request)
        status, answer = driver.chat(json.dumps(body).encode())
        assert status == 200, answer
        state = json.loads(answer)["stream_state"]
    assert driver.issued.hits == len(REASONED) - 1
