"""A step of a batch that waits on a server, bounded (`run`), or not (replay, tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class StepTimeout(TimeoutError):
    """A step of a batch waited on a server past `step_timeout_s` (an outage)."""

    def __init__(self, step: str, timeout_s: float) -> None:
        super().__init__(f"{step} took longer than {timeout_s:g}s")
        self.step = step


def within(aw: Awaitable[T], timeout_s: float | None, step: str) -> Awaitable[T]:
    """What a batch's step awaits: `aw` itself when unbounded (replay, the tests, serve:
    one coroutine frame less per step, five per batch, where serve's one-record batches
    are a few tens of µs), else `bounded`."""
    return aw if timeout_s is None else bounded(aw, timeout_s, step)


async def bounded(aw: Awaitable[T], timeout_s: float | None, step: str) -> T:
    """`await aw`, within `timeout_s` when given (None: unbounded, and no event loop is
    needed, as `run_sync` drives the loop in replay and the tests)."""
    if timeout_s is None:
        return await aw
    try:
        async with asyncio.timeout(timeout_s):
            return await aw
    except TimeoutError:
        raise StepTimeout(step, timeout_s) from None
