"""A KIP-848 member that missed a change of its assignment: found, and made to join again.

librdkafka times a ConsumerGroupHeartbeat out after one heartbeat interval and sends the
same request again. The coordinator answers with the member's assignment only when it
changed or when the request is a full one, so a change carried by the answer that timed
out is never heard of: the member keeps partitions the group gave to others (they wait),
or never takes partitions given to it, until its rebalance timeout fences it. So after
one of its heartbeats timed out, the worker asks the coordinator what it expects of this
member; one that still holds what it should give up, or lacks a partition nobody holds,
twice in a row with no rebalance callback between, leaves the group and joins again (a
join is a full request). Why and how it was found: docs/design/rebalancing.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger("derender.worker")

# librdkafka's line (facility REQTMOUT) when a heartbeat of the consumer timed out.
HEARTBEAT_TIMED_OUT = "Timed out ConsumerGroupHeartbeatRequest"
# After a timeout, the first look: the heartbeat sent again and a callback had time.
FIRST_LOOK_S = 1.5
# Between two looks that must agree before the member joins again.
LOOK_EVERY_S = 2.0
# How long after the last timeout the looks go on.
WATCH_FOR_S = 60.0


@dataclass(frozen=True)
class GroupView:
    """The coordinator's view, for this member and one topic: the partitions it should
    hold (its target assignment) and those the other members hold."""

    target: frozenset[int]
    others: frozenset[int]


def astray(mine: set[int], view: GroupView) -> tuple[frozenset[int], frozenset[int]]:
    """What the member holds though the group moved it away, and what the group gave it
    that nobody holds and it has not taken."""
    return frozenset(mine) - view.target, view.target - frozenset(mine) - view.others


class Member(Protocol):
    """What the watch needs of the consumer (`fetch.Fetcher`)."""

    loop: asyncio.AbstractEventLoop | None
    callbacks: int  # rebalance callbacks run so far

    def held(self) -> set[int]: ...

    def rejoin(self) -> None: ...


class HeartbeatLog:
    """The consumer's librdkafka `logger`: every line goes on to `forward`; a timed-out
    heartbeat also calls `on_timeout` (on the thread that polls the consumer)."""

    def __init__(self, forward: Any, on_timeout: Callable[[], None]) -> None:
        self.forward = forward
        self.on_timeout = on_timeout

    def log(self, level: int, fmt: str, *args: object) -> None:
        if len(args) >= 3 and args[0] == "REQTMOUT" and HEARTBEAT_TIMED_OUT in str(args[2]):
            self.on_timeout()
        self.forward.log(level, fmt, *args)


class GroupWatch:
    """Looks at the coordinator's view of this member after a heartbeat timed out
    (`heartbeat_timed_out`, from any thread) and makes a member that missed its new
    assignment join again. `describe` returns the view, or None when it cannot."""

    def __init__(
        self,
        member: Member,
        describe: Callable[[], Awaitable[GroupView | None]],
        on_rejoin: Callable[[], object] = lambda: None,
        first_look_s: float = FIRST_LOOK_S,
        look_every_s: float = LOOK_EVERY_S,
        watch_for_s: float = WATCH_FOR_S,
    ) -> None:
        self.member = member
        self.describe = describe
        self.on_rejoin = on_rejoin
        self.first_look_s = first_look_s
        self.look_every_s = look_every_s
        self.watch_for_s = watch_for_s
        self.rejoins = 0
        self._until = 0.0
        self._task: asyncio.Task[None] | None = None

    def heartbeat_timed_out(self) -> None:
        loop = self.member.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # (a loop that closed meanwhile)
                loop.call_soon_threadsafe(self._watch)

    def _watch(self) -> None:
        self._until = time.monotonic() + self.watch_for_s
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._look())

    async def _look(self) -> None:
        await asyncio.sleep(self.first_look_s)
        suspect: tuple[Any, ...] | None = None
        while time.monotonic() < self._until:
            try:
                view = await self.describe()
            except Exception as exc:  # (the next look tries again)
                log.debug("describing the group: %s", exc)
                view = None
            if view is not None:
                stale, missing = astray(self.member.held(), view)
                if not stale and not missing:
                    return
                seen = (stale, missing, self.member.callbacks)
                if seen == suspect:
                    log.warning(
                        "the group's coordinator expects this member to give up %s and take "
                        "%s, which its consumer never heard of (a heartbeat timed out): "
                        "joining the group again",
                        sorted(stale) or "nothing",
                        sorted(missing) or "nothing",
                    )
                    self.rejoins += 1
                    self.on_rejoin()
                    self.member.rejoin()
                    return
                suspect = seen
            await asyncio.sleep(self.look_every_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
