"""`tail`'s Transcript reads the Responses and Messages APIs too: a stream's events and the
same tokens' whole object assemble to the same transcript, whose text, reasoning and calls
are chat's for those tokens (generated cases over a sample of the parser formats)."""

from __future__ import annotations

import json

import jiter
import pytest
from hypothesis import HealthCheck, given, settings

from tests.core.apis import cases as responses_cases
from tests.core.apis import test_messages_sdk as messages_cases
from tests.core.parsers.shared.samples import SETUPS
from tests.core.sdk.sdk_cases import PLAIN
from worker.tools.tail import Transcript

# The plain model and formats that write reasoning, text and calls in different shapes.
FORMATS = [PLAIN, *sorted(SETUPS)[:: max(1, len(SETUPS) // 6)]]

_settings = settings(
    max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None
)


def transcript(values: list[bytes]) -> Transcript:
    t = Transcript()
    for v in values:
        if v != b"[DONE]":
            t.add(json.loads(v))
    return t


def same_words(a: Transcript, b: Transcript) -> None:
    """Text, reasoning and calls agree (calls' arguments compared as the SDKs read them,
    since Messages' whole `input` is the parsed object)."""
    assert a.content.get(0, "") == b.content.get(0, "")
    assert a.reasoning.get(0, "") == b.reasoning.get(0, "")
    assert [_call(c) for c in a.tools.get(0, [])] == [_call(c) for c in b.tools.get(0, [])]
    assert a.errors == b.errors == []


def _call(text: str) -> tuple[str, object]:
    """A call's name and its arguments as the SDKs read streamed fragments (jiter's partial
    mode: a call a stop sequence cut mid-value reads as the values it completed)."""
    name, _, args = text.partition("(")
    try:
        return name, jiter.from_json((args or "{}").encode(), partial_mode=True)
    except ValueError:
        return name, args


def chat_transcript(chat: bytes) -> Transcript:
    t = Transcript()
    t.add(json.loads(chat))
    return t


@pytest.mark.parametrize("name", FORMATS)
def test_a_responses_stream_reads_as_its_whole_response_and_as_chat(name: str) -> None:
    @_settings
    @given(case=responses_cases.cases(name))
    def prop(case: responses_cases.Case) -> None:
        answers = responses_cases.run(case)
        streamed, whole = transcript(answers.stream), transcript([answers.whole])
        same_words(streamed, whole)
        assert streamed.finish == whole.finish and streamed.finish[0].startswith(
            ("completed", "incomplete")
        )
        chat = chat_transcript(answers.chat)
        # Chat's reasoning and text; Responses carries no text beside a call the way chat
        # may, so only the calls' names and arguments are compared when there are calls.
        assert whole.reasoning.get(0, "") == chat.reasoning.get(0, "")
        if not chat.tools.get(0):
            assert whole.content.get(0, "") == chat.content.get(0, "")

    prop()


@pytest.mark.parametrize("name", FORMATS)
def test_a_messages_stream_reads_as_its_whole_message(name: str) -> None:
    @_settings
    @given(case=messages_cases.cases(name))
    def prop(case: messages_cases.Case) -> None:
        stream, whole = messages_cases.run_case(case)
        streamed, assembled = transcript(stream), transcript([whole])
        same_words(streamed, assembled)
        assert streamed.finish == assembled.finish

    prop()
