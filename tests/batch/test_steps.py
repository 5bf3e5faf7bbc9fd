"""Bounded steps (`steps.bounded`): one lazy timer per task, and the behaviour of a timeout
around each step, on the event loop `run` uses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from worker.batch.steps import StepTimeout, bounded


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return uvloop.run(main())


async def answered() -> str:
    return "ok"


def test_a_step_past_its_deadline_is_a_step_timeout_after_many_quick_ones() -> None:
    async def main() -> tuple[float, int]:
        for _ in range(200):  # (each moves the deadline on: the timer re-arms for the last)
            assert await bounded(asyncio.sleep(0.001, "ok"), 0.3, "quick") == "ok"
        t0 = time.monotonic()
        with pytest.raises(StepTimeout) as caught:
            await bounded(asyncio.sleep(5), 0.3, "load")
        assert caught.value.step == "load"
        assert str(caught.value) == "load took longer than 0.3s"
        me = asyncio.current_task()
        assert me is not None
        await asyncio.sleep(0.01)  # (not cancelled any more)
        return time.monotonic() - t0, me.cancelling()

    took, cancelling = run(main)
    assert 0.25 <= took < 1.0
    assert cancelling == 0


def test_steps_that_answer_at_once_never_time_out_however_long_the_task_runs() -> None:
    async def main() -> int:
        done = 0
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # (far past every step's own timeout)
            await bounded(answered(), 0.05, "produce")
            await asyncio.sleep(0.001)  # (the task waits between steps: no step running)
            done += 1
        return done

    assert run(main) > 10


def test_a_cancel_from_outside_stays_a_cancel() -> None:
    async def main() -> None:
        async def lane() -> None:
            await bounded(asyncio.sleep(5), 10.0, "save")

        task = asyncio.create_task(lane())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main)


def test_a_timeout_the_step_raises_itself_is_a_step_timeout() -> None:
    async def stalled() -> None:
        raise TimeoutError("the client gave up")

    async def main() -> None:
        with pytest.raises(StepTimeout) as caught:
            await bounded(stalled(), 10.0, "commit")
        assert caught.value.step == "commit"

    run(main)


def test_a_nested_step_is_bounded_by_its_own_timeout() -> None:
    async def main() -> float:
        async def outer() -> None:
            await bounded(asyncio.sleep(5), 0.1, "inner")

        t0 = time.monotonic()
        with pytest.raises(StepTimeout):
            await bounded(outer(), 3.0, "outer")
        return time.monotonic() - t0

    assert run(main) < 1.0


def test_a_step_that_swallows_the_cancel_leaves_the_task_uncancelled() -> None:
    async def stubborn() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            return "kept going"
        return "slept"

    async def main() -> tuple[str, int]:
        answer = await bounded(stubborn(), 0.1, "load")
        me = asyncio.current_task()
        assert me is not None
        await asyncio.sleep(0.01)
        return answer, me.cancelling()

    assert run(main) == ("kept going", 0)
