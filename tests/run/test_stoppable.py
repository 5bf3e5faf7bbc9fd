"""A start-up step that a stop cuts short (worker/run/stoppable.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from worker.run.stoppable import unless_stopped


async def _after(delay_s: float, then: asyncio.Event | None = None) -> None:
    await asyncio.sleep(delay_s)
    if then is not None:
        then.set()


def test_a_step_that_finishes_first_is_done() -> None:
    async def main() -> bool:
        return await unless_stopped(_after(0.01), asyncio.Event())

    assert asyncio.run(main()) is True


def test_a_stop_cuts_a_step_short_and_cancels_it() -> None:
    cancelled: list[bool] = []

    async def hangs() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> tuple[bool, float]:
        stopping = asyncio.Event()
        later = asyncio.create_task(_after(0.05, stopping))
        started = time.monotonic()
        done = await unless_stopped(hangs(), stopping)
        await later
        return done, time.monotonic() - started

    done, took = asyncio.run(main())
    assert done is False and cancelled == [True] and took < 1.0


def test_a_step_that_fails_raises() -> None:
    async def fails() -> None:
        raise ConnectionError("refused")

    async def main() -> bool:
        return await unless_stopped(fails(), asyncio.Event())

    with pytest.raises(ConnectionError, match="refused"):
        asyncio.run(main())


def test_a_stop_already_asked_for_runs_nothing() -> None:
    ran: list[bool] = []

    async def step() -> None:
        await asyncio.sleep(0.01)
        ran.append(True)

    async def main() -> bool:
        stopping = asyncio.Event()
        stopping.set()
        return await unless_stopped(step(), stopping)

    assert asyncio.run(main()) is False and ran == []
