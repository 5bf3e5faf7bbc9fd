"""Harmony messages (vLLM 0.33.0 vllm/parser/harmony.py): their markers (`HARMONY`), what a
message header says, and what its body therefore is.

A header is the text between the start of a message and `<|message|>`, special tokens
included, e.g. `<|channel|>analysis`, `assistant<|channel|>commentary to=functions.f
<|constrain|>json` or `assistant to=functions.f<|channel|>commentary json`. It is read
the way openai-harmony's streaming parser reads it (the parser vLLM feeds every token
to), and the body is classified the way vLLM's Harmony parser classifies it:

- addressed to a function (`functions.NAME`, or a bare name that is not `assistant`
  nor a built-in tool) → a tool call named NAME;
- channel `analysis` → reasoning;
- channel `final`, or `commentary` without a recipient (a preamble) → content;
- anything else (other roles, built-in tools, unknown channels) → nobody's.

A header openai-harmony rejects makes it skip tokens until the next message starts;
`None` here means the same.
"""

from __future__ import annotations

from typing import NamedTuple

from worker.core.parsers.language.grammar import Frames

CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
START = "<|start|>"

# gpt-oss's messages: the reasoning format `openai_gptoss` and the tool format `openai`
# both read them (the first header needs no start: the prompt ends with it).
HARMONY = Frames(START, "<|message|>", ("<|end|>", "<|call|>", "<|return|>"), (CHANNEL, CONSTRAIN))

ROLES = frozenset(("system", "developer", "user", "assistant", "tool"))
# vLLM's built-in tools (harmony_utils.BUILTIN_TOOL_TO_MCP_SERVER_LABEL): their messages
# are not function calls.
BUILTIN_TOOLS = frozenset(("python", "browser", "container"))

# What a body is (Header.kind).
KIND_DROP = 0
KIND_REASONING = 1
KIND_CONTENT = 2
KIND_CALL = 3


class Header(NamedTuple):
    kind: int
    name: str  # the function, for KIND_CALL
    # vLLM counts the body's tokens as reasoning tokens (analysis, or commentary to a
    # recipient), whatever is done with the text.
    counts: bool


def read_header(text: str, role_known: bool) -> Header | None:
    """The header `text` of a message; `role_known`: the role was given before the
    header (the first message, whose `<|start|>assistant` is the prompt's end).
    None when openai-harmony would reject the header."""
    if text.startswith(START):
        text = text[len(START) :]
    channel: str | None = None
    at = text.find(CHANNEL)
    if at >= 0:
        rest = text[at + len(CHANNEL) :]
        end = next((i for i, c in enumerate(rest) if c.isspace() or c == "<"), len(rest))
        if end == 0:
            return None
        channel = rest[:end]
        text = text[:at] + rest[end:]
    text = text.strip()
    if CONSTRAIN in text:
        text = text.replace(CONSTRAIN, " " + CONSTRAIN).strip()
    parts = text.split()
    role = "assistant"
    if not role_known:
        if not parts:
            return None
        if parts[0] in ROLES:
            role = parts[0]
        elif len(parts) > 1 or parts[0].startswith("to="):
            role = "tool"  # an unknown role with a recipient: a tool's message
            parts.pop(0)
        else:
            return None
    if parts and parts[0] == role:
        parts.pop(0)
    recipient: str | None = None
    if parts:
        last = parts.pop()
        if last.startswith("to="):
            recipient = last[3:]
        elif not parts:
            recipient = last  # a single word: the recipient
        elif len(parts) == 1:
            # `last` is the content type; the word before it the recipient.
            recipient = parts.pop().removeprefix("to=")
        else:
            return None
    if role != "assistant":
        return Header(KIND_DROP, "", False)  # vLLM keeps only the assistant's messages
    return classify(channel, recipient)


def classify(channel: str | None, recipient: str | None) -> Header:
    if recipient is not None:
        # An older openai-harmony left ` <|constrain|>json` in the recipient.
        cut = recipient.find(CONSTRAIN)
        if cut >= 0:
            recipient = recipient[:cut].rstrip() or None
    counts = channel == "analysis" or (channel == "commentary" and recipient is not None)
    if recipient and _is_function(recipient):
        return Header(KIND_CALL, recipient.removeprefix("functions."), counts)
    if channel == "analysis":
        return Header(KIND_REASONING, "", counts)
    if channel == "final" or (channel == "commentary" and recipient is None):
        return Header(KIND_CONTENT, "", counts)
    return Header(KIND_DROP, "", counts)


def _is_function(recipient: str) -> bool:
    if recipient.startswith("<|") or recipient == "assistant":
        return False
    if recipient.startswith("functions."):
        return len(recipient) > len("functions.")
    return recipient.split(".", 1)[0] not in BUILTIN_TOOLS
