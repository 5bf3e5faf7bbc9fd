"""Start-up steps that a stop cuts short: connecting to a server that does not answer
may take the whole step timeout, longer than a pod's grace period, and there is nothing
to finish before joining the group."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

# How long a cancelled step may take to unwind (a client closing half-open connections).
UNWIND_S = 1.0


async def unless_stopped(aw: Awaitable[None], stopping: asyncio.Event) -> bool:
    """Await `aw` unless `stopping` is set first (`aw` is then cancelled, given UNWIND_S
    to unwind, and how it ends is not reported): whether it finished. Its exception, if
    it finished with one, is raised."""
    task = asyncio.ensure_future(aw)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        cut = not task.done()
        if cut:
            task.cancel()
            task.add_done_callback(_ignored)
            await asyncio.wait({task}, timeout=UNWIND_S)
    if cut:
        return False
    task.result()
    return True


def _ignored(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # (retrieved: a step cut short may still fail as it unwinds)
