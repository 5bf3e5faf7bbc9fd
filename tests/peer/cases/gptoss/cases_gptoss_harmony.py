"""gpt-oss's parity cases, the text side (cases_gptoss.py builds the cases): Harmony's token
ids and vLLM's EOS ids, the two servers, the requests, Harmony messages and calls as text,
and the case builders every group uses."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.peer.cases.cases import Builder
from tests.peer.drive import GPTOSS_MODEL, Case, Gen

SEED = 20261206
PEER_HOME = Path(os.environ.get("DERENDER_PEER_HOME", Path.home() / ".cache" / "derender-peer"))
# The tokenizer.json in vLLM's model folder; our registry reads the same file.
GPTOSS_TOKENIZER = PEER_HOME / "models" / "gptoss" / "tokenizer.json"

ON = "gptoss-on"  # openai_gptoss + openai
REASONING = "gptoss-reasoning"  # openai_gptoss only
SERVERS = (ON, REASONING)

STARTOFTEXT = 199998
ENDOFTEXT = 199999  # the pad token; a generation-config EOS
RETURN = 200002  # <|return|>: tokenizer_config's eos_token, vLLM's primary EOS
CONSTRAIN = 200003
CHANNEL = 200005
START = 200006
END = 200007
MESSAGE = 200008
CALL = 200012  # <|call|>: a generation-config EOS
ENDOFPROMPT = 200018  # <|endofprompt|> (openai-harmony names it <|reserved_200018|>)
RESERVED = 200013  # <|reserved_200013|>
# vLLM's EOS ids, primary first (the model folder's generation_config.json).
GPTOSS_EOS = (RETURN, ENDOFTEXT, CALL)
# The stop_reason the engine reports for each EOS id (None for the primary).
REPORTED = {RETURN: None, ENDOFTEXT: ENDOFTEXT, CALL: CALL}

# Logprob candidates: words, a space, lone UTF-8 bytes (CJK and emoji lead bytes), a JSON
# opener, 你.
ALTERNATIVES = (13225, 290, 220, 11, 13, 162, 172, 253, 10848, 12370)

NEXT = "<|start|>assistant"
MESSAGES = [{"role": "user", "content": "Say hello"}]
JSON_CT = " <|constrain|>json"
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def chat_request(**kw: Any) -> dict[str, Any]:
    return {"model": GPTOSS_MODEL, "messages": MESSAGES, **kw}


def completion_request(**kw: Any) -> dict[str, Any]:
    return {"model": GPTOSS_MODEL, "prompt": "Once upon a time", **kw}


# --------------------------------------------------------------------------- Harmony text


def msg(
    channel: str,
    body: str,
    *,
    to: str | None = None,
    ctype: str = "",
    end: str = "<|end|>",
    to_first: bool = False,
) -> str:
    """One message after its `<|start|>assistant`: the header (the recipient after the
    channel, or before it with `to_first`), `<|message|>`, the body, the end marker."""
    if to is not None and to_first:
        head = f" to={to}<|channel|>{channel}{ctype}"
    else:
        head = f"<|channel|>{channel}" + (f" to={to}" if to is not None else "") + ctype
    return f"{head}<|message|>{body}{end}"


def harmony(*messages: str) -> str:
    """Messages as one output: the first's `<|start|>assistant` is the prompt's end."""
    return NEXT.join(messages)


def analysis(text: str) -> str:
    return msg("analysis", text)


def final(text: str, end: str = "<|return|>") -> str:
    return msg("final", text, end=end)


def preamble(text: str) -> str:
    return msg("commentary", text)


def args_text(args: Any, compact: bool = True) -> str:
    """Arguments as gpt-oss writes them (compact, non-ASCII as is), or as vLLM's whole
    response re-serializes them (`json.dumps` defaults)."""
    if compact:
        return json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(args)


def call(
    name: str,
    args: Any,
    *,
    ctype: str = JSON_CT,
    end: str = "<|call|>",
    to_first: bool = False,
    prefix: str = "functions.",
) -> str:
    body = args if isinstance(args, str) else args_text(args)
    return msg("commentary", body, to=prefix + name, ctype=ctype, end=end, to_first=to_first)


def calls(items: Sequence[tuple[str, Any]]) -> list[str]:
    """One call message per item; each but the last ends `<|end|>` (the engine stops at
    `<|call|>`), the last `<|call|>`."""
    return [
        call(n, a, end="<|call|>" if k == len(items) - 1 else "<|end|>")
        for k, (n, a) in enumerate(items)
    ]


def gen(ids: list[int], finish: str = "stop", **kw: Any) -> Gen:
    """A choice; finishing "stop" on an EOS id, its stop_reason as the engine reports it."""
    if finish == "stop" and "stop_reason" not in kw and ids and ids[-1] in REPORTED:
        kw["stop_reason"] = REPORTED[ids[-1]]
    return Gen(ids, finish, **kw)


def _case(
    name: str,
    server: str,
    req: dict[str, Any],
    gens: list[Gen],
    shape: str | None = None,
    api: str = "chat",
) -> Case:
    case = Case(f"gptoss-{name}", server, api, False, req, [gens])
    if shape is not None:
        case.extra["shape"] = shape
    return case


def _text(
    b: Builder, name: str, server: str, text: str, how: str | int = "random", **kw: Any
) -> None:
    """A case of one Harmony text (finish "stop" when it ends on an EOS id, else
    "length"), streamed and whole."""
    ids = b.ids(text)
    finish = "stop" if ids and ids[-1] in REPORTED else "length"
    shape = kw.pop("shape", None)
    b.both(_case(name, server, chat_request(**kw), [gen(ids, finish)], shape), how)
