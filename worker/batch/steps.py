"""A step of a batch that waits on a server, bounded (`run`), or not (replay, tests).

A batch makes five bounded steps, and a timer armed and cancelled around each (as
`asyncio.timeout` does) cost more than the steps themselves when their servers answer at
once. So each task gets one lazy timer (`_Watch`): a step only writes its deadline; the
timer, once armed, fires at the deadline it was armed for and then either cancels the
step running past its own deadline or re-arms for it, or goes idle between steps. A step
nested in another (a commit inside a batch's step) is timed by `asyncio.timeout`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

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


class _Watch:
    """One task's timer over its steps, one step at a time."""

    __slots__ = ("armed", "deadline", "fired", "handle", "loop", "running", "task")

    def __init__(self, task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> None:
        self.task = task
        self.loop = loop
        self.deadline = 0.0  # of the step running
        self.running = False
        self.fired = False  # the step running was cancelled for its deadline
        self.handle: asyncio.TimerHandle | None = None
        self.armed = 0.0  # when `handle` fires

    def start(self, timeout_s: float) -> None:
        self.deadline = self.loop.time() + timeout_s
        self.running = True
        if self.handle is not None and self.armed <= self.deadline:
            return  # (it fires first, then re-arms for this step if it is still running)
        if self.handle is not None:
            self.handle.cancel()
        self._arm()

    def _arm(self) -> None:
        self.armed = self.deadline
        self.handle = self.loop.call_at(self.deadline, self._check)

    def _check(self) -> None:
        self.handle = None
        if not self.running or self.fired:
            return  # (idle until the next step arms it)
        if self.loop.time() < self.deadline:
            self._arm()
            return
        self.fired = True
        self.task.cancel()


_watches: dict[asyncio.Task[Any], _Watch] = {}


def _forget(task: asyncio.Task[Any]) -> None:
    watch = _watches.pop(task, None)
    if watch is not None and watch.handle is not None:
        watch.handle.cancel()


async def bounded(aw: Awaitable[T], timeout_s: float | None, step: str) -> T:
    """`await aw`, within `timeout_s` when given (None: unbounded, and no event loop is
    needed, as `run_sync` drives the loop in replay and the tests)."""
    if timeout_s is None:
        return await aw
    task = asyncio.current_task()
    if task is None:
        return await _timed(aw, timeout_s, step)
    watch = _watches.get(task)
    if watch is None:
        watch = _watches[task] = _Watch(task, asyncio.get_running_loop())
        task.add_done_callback(_forget)
    if watch.running:  # (nested in another step of this task)
        return await _timed(aw, timeout_s, step)
    cancelling = task.cancelling()
    watch.start(timeout_s)
    try:
        return await aw
    except TimeoutError:  # (one the step raised itself counts too, as `_timed` has it)
        raise StepTimeout(step, timeout_s) from None
    except asyncio.CancelledError:
        if watch.fired:
            watch.fired = False
            if task.uncancel() <= cancelling:  # (else cancelled from outside too)
                raise StepTimeout(step, timeout_s) from None
        raise
    finally:
        watch.running = False
        if watch.fired:  # (the step swallowed the cancel: it is taken back)
            watch.fired = False
            task.uncancel()


async def _timed(aw: Awaitable[T], timeout_s: float, step: str) -> T:
    try:
        async with asyncio.timeout(timeout_s):
            return await aw
    except TimeoutError:
        raise StepTimeout(step, timeout_s) from None
