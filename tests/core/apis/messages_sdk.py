"""The official `anthropic` SDK as the oracle of Messages output: our events served to it
as SSE over a mock HTTP transport (its own SSE decoding, event types and `MessageStream`
accumulator run), and our whole message read by `messages.create`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import jsonschema
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import BaseModel, TypeAdapter

EVENTS: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
# Our own schemas (schemas/, generated from worker/wire/messages.py) say the same.
EVENT_SCHEMA = jsonschema.Draft202012Validator(
    json.loads((SCHEMAS / "messages_event.json").read_text())
)
MESSAGE_SCHEMA = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "message.json").read_text()))
MESSAGES: Any = [{"role": "user", "content": "?"}]


def sse(values: list[bytes]) -> bytes:
    """The SSE body the Messages API writes: an `event:` line naming each event's type,
    then its `data:` line (the SDK skips events without an `event:` line)."""
    out = []
    for v in values:
        kind = json.loads(v)["type"]
        out.append(b"event: " + kind.encode() + b"\ndata: " + v + b"\n\n")
    return b"".join(out)


def client(body: bytes, stream: bool, status: int = 200) -> anthropic.Anthropic:
    """The SDK, its HTTP answered with `body`."""
    media = "text/event-stream" if stream else "application/json"

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers={"content-type": media}, content=body)

    return anthropic.Anthropic(
        api_key="test",
        base_url="http://derender.test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        max_retries=0,
    )


def no_extra(value: Any, where: str = "") -> None:
    """Every field of a parsed SDK object is one its type declares (the SDK's models
    keep unknown fields silently): our JSON says nothing the API does not."""
    if isinstance(value, BaseModel):
        extra = value.model_extra or {}
        assert not extra, f"{where or type(value).__name__}: fields the SDK does not know: {extra}"
        for name in type(value).model_fields:
            if name != "input":  # a tool's arguments: any JSON object
                no_extra(getattr(value, name), f"{where}.{name}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            no_extra(v, f"{where}[{i}]")


def validate_event(raw: bytes) -> Any:
    """One event against the SDK's event union (pydantic), nothing unknown in it."""
    EVENT_SCHEMA.validate(json.loads(raw))
    event = EVENTS.validate_python(json.loads(raw))
    no_extra(event)
    return event


def accumulated(values: list[bytes], model: str = "m") -> Message:
    """Our stream read by `client.messages.stream(...)`: each event validated as it
    arrives, the final message as the SDK's accumulator builds it."""
    for v in values:
        validate_event(v)
    with client(sse(values), stream=True).messages.stream(
        model=model, max_tokens=16, messages=MESSAGES
    ) as stream:
        for _ in stream:
            pass
        return stream.get_final_message()


def read_whole(body: bytes, model: str = "m") -> Message:
    """Our whole message read by `client.messages.create(...)`, validated by the SDK's
    `Message` type as well."""
    message = client(body, stream=False).messages.create(
        model=model, max_tokens=16, messages=MESSAGES
    )
    no_extra(message)
    Message.model_validate(json.loads(body))
    MESSAGE_SCHEMA.validate(json.loads(body))
    return message
