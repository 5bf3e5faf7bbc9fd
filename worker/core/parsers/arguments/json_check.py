"""Arguments that always parse: a JSON prefix check for arguments streamed as written.

A call's arguments go out as the model writes them, and what is out cannot be taken
back. So they go out only up to the last point where closing the open strings and
containers makes valid JSON (a *safe point*: just after `{`, `[` or a complete value,
anywhere inside a value string but an escape, after a number's digits); the text since
then — a `,`, a key and its `:`, half a literal or escape — is held. Where the text stops
being JSON, or the call ends before its arguments do, the held text is dropped and the
closers are sent: `{invalid json}` gives `{}`, `{"city": "Tok` cut short gives
`{"city": "Tok"}`, so a client's `json.loads` of the arguments never fails.

Used by the JSON call lists (call_list.py: hermes, llama3_json / llama4_json, Mistral
before v11, tool_choice "required"), whose vLLM streams close partial arguments too. The
bare JSON arguments of Kimi K2, Mistral v11 and DeepSeek V3 (json_args.py) stay verbatim,
as vLLM returns them (its Kimi K2 test keeps `{"city": "Beijing"` as written).

The held text is at most one key (or literal, escape, number tail) long, the stack of
open containers at most MAX_DEPTH. Strings — the bulk of long arguments — are skipped by
one regex search per chunk.
"""

from __future__ import annotations

import re

from worker.core.parsers.language.state import JsonCheck

# JsonCheck.mode: what may come next
VALUE = 0  # a value (the start, after `:`, after `,` in an array)
FIRST_ITEM = 1  # after `[`: a value or `]`
FIRST_KEY = 2  # after `{`: a key or `}`
KEY = 3  # after `,` in an object: a key
COLON = 4  # after a key
AFTER = 5  # after a value: `,` or the container's closer
STR = 6  # inside a string (JsonCheck.key: a key's)
ESC = 7  # after a backslash in a string
HEX = 8  # inside `\uXXXX` (JsonCheck.rest: the digits still to come, as that many `x`)
NUM_SIGN = 9  # after a number's `-`
NUM_ZERO = 10  # after a leading `0`
NUM_INT = 11  # in the integer digits
NUM_DOT = 12  # after `.`
NUM_FRAC = 13  # in the fraction digits
NUM_E = 14  # after `e` / `E`
NUM_ESIGN = 15  # after the exponent's sign
NUM_EXP = 16  # in the exponent digits
LITERAL = 17  # inside `true` / `false` / `null` (JsonCheck.rest: what is still to come)
BAD = 18  # the text stopped being JSON: nothing more goes out

_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]+')
_ESCAPES = frozenset('"\\/bfnrtu')
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")
_SPACE = frozenset(" \t\n\r")
_LITERALS = {"t": "rue", "f": "alse", "n": "ull"}
_CLOSER = {"{": "}", "[": "]"}
# Containers open at once, at most: the stack is state, and deeper JSON is beyond what
# clients parse anyway (Python's json stops near 1,000). An opener past it breaks the text.
MAX_DEPTH = 512
# Number states where the digits so far are a whole number (safe to send).
_NUMBER_DONE = frozenset((NUM_ZERO, NUM_INT, NUM_FRAC, NUM_EXP))
_NUMBER = frozenset(range(NUM_SIGN, NUM_EXP + 1))


def _safe(check: JsonCheck) -> bool:
    mode = check.mode
    if mode == STR:
        return not check.key
    return mode in (FIRST_ITEM, FIRST_KEY, AFTER) or mode in _NUMBER_DONE


def closers(check: JsonCheck) -> str:
    """What closes the text sent so far (the text held is dropped)."""
    quote = '"' if check.mode in (STR, ESC, HEX) and not check.key else ""
    return quote + "".join(_CLOSER[c] for c in reversed(check.stack))


def feed(check: JsonCheck, text: str) -> str:
    """The part of the held text and `text` that may go out now."""
    if check.mode == BAD:
        return ""
    safe = -1  # the end of the last safe point in `text` (-1: none in it)
    i, n = 0, len(text)
    while i < n:
        if check.mode == STR:
            m = _STRING_RUN.match(text, i)
            if m is not None:
                i = m.end()
                if not check.key:
                    safe = i
                continue
        if not _step(check, text[i]):
            out = (check.held + text[:safe] if safe >= 0 else "") + closers(check)
            check.mode, check.held, check.stack = BAD, "", ""
            return out
        i += 1
        if _safe(check):
            safe = i
    if safe < 0:
        check.held += text
        return ""
    out = check.held + text[:safe]
    check.held = text[safe:]
    return out


def finish(check: JsonCheck) -> str:
    """The arguments end here (the call or the output did): what closes them."""
    if check.mode == BAD or (check.mode == AFTER and not check.stack):
        return ""
    if check.mode == VALUE and not check.stack:
        return ""  # nothing was written (the caller sends `{}`)
    out = closers(check)
    check.mode, check.held, check.stack = BAD, "", ""
    return out


def _value(check: JsonCheck, c: str) -> bool:
    """`c` starts a value."""
    if c in "{[":
        if len(check.stack) >= MAX_DEPTH:
            return False
        check.stack += c
        check.mode = FIRST_KEY if c == "{" else FIRST_ITEM
    elif c == '"':
        check.mode, check.key = STR, False
    elif c == "-":
        check.mode = NUM_SIGN
    elif c == "0":
        check.mode = NUM_ZERO
    elif c in _DIGITS:
        check.mode = NUM_INT
    elif c in _LITERALS:
        check.mode, check.rest = LITERAL, _LITERALS[c]
    else:
        return False
    return True


def _close(check: JsonCheck, c: str) -> bool:
    """`c` may close the innermost container."""
    if not check.stack or _CLOSER[check.stack[-1]] != c:
        return False
    check.stack = check.stack[:-1]
    check.mode = AFTER
    return True


def _step(check: JsonCheck, c: str) -> bool:
    """One character; False when the text stops being JSON with it."""
    mode = check.mode
    if mode == STR:  # `"`, `\` or a control character (the run above took the rest)
        if c == '"':
            check.mode = COLON if check.key else AFTER
            return True
        if c == "\\":
            check.mode = ESC
            return True
        return False
    if mode == ESC:
        if c not in _ESCAPES:
            return False
        check.mode, check.rest = (HEX, "xxxx") if c == "u" else (STR, "")
        return True
    if mode == HEX:
        if c not in _HEX:
            return False
        check.rest = check.rest[1:]
        if not check.rest:
            check.mode = STR
        return True
    if mode == LITERAL:
        if c != check.rest[0]:
            return False
        check.rest = check.rest[1:]
        if not check.rest:
            check.mode = AFTER
        return True
    if mode in _NUMBER:
        return _number(check, c)
    if c in _SPACE:
        return True
    if mode == VALUE:
        return _value(check, c)
    if mode == FIRST_ITEM:
        return _close(check, c) or _value(check, c)
    if mode in (FIRST_KEY, KEY):
        if c == '"':
            check.mode, check.key = STR, True
            return True
        return mode == FIRST_KEY and _close(check, c)
    if mode == COLON:
        if c != ":":
            return False
        check.mode = VALUE
        return True
    # AFTER
    if c == "," and check.stack:
        check.mode = KEY if check.stack[-1] == "{" else VALUE
        return True
    return _close(check, c)


def _number(check: JsonCheck, c: str) -> bool:
    """One character in or just after a number."""
    mode = check.mode
    digit = c in _DIGITS
    if mode == NUM_SIGN:
        if not digit:
            return False
        check.mode = NUM_ZERO if c == "0" else NUM_INT
    elif mode in (NUM_ZERO, NUM_INT, NUM_FRAC):
        if digit and mode != NUM_ZERO:
            return True
        if c == "." and mode != NUM_FRAC:
            check.mode = NUM_DOT
        elif c in "eE":
            check.mode = NUM_E
        else:
            check.mode = AFTER  # the number is complete: `c` comes after it
            return _step(check, c)
    elif mode == NUM_DOT:
        if not digit:
            return False
        check.mode = NUM_FRAC
    elif mode == NUM_E:
        if c in "+-":
            check.mode = NUM_ESIGN
        elif digit:
            check.mode = NUM_EXP
        else:
            return False
    elif mode == NUM_ESIGN:
        if not digit:
            return False
        check.mode = NUM_EXP
    else:  # NUM_EXP
        if digit:
            return True
        check.mode = AFTER
        return _step(check, c)
    return True
