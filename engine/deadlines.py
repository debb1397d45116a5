"""Time limits that cost almost nothing per call.

`asyncio.timeout` schedules one timer per call; with the long limits tools usually have
(minutes), the cancelled timers pile up in the loop's heap and each call pays ~15-20 µs.
`deadline(seconds)` keeps long limits in one watchdog per event loop that wakes every
`TICK` seconds and cancels the calls that are over time, so a limit of 300 s is enforced
within 0.1 s. Short limits (≤ `PRECISE_UP_TO`) still use `asyncio.timeout`, exactly.
Either way an expired limit raises `TimeoutError` in the caller, like `asyncio.timeout`.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType
from typing import Any

TICK = 0.1
PRECISE_UP_TO = 5.0


class _Watchdog:
    """One per event loop: cancels the tasks whose deadline has passed."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.active: dict[deadline, float] = {}
        self.handle: asyncio.TimerHandle | None = None

    def add(self, entry: "deadline", when: float) -> None:
        self.active[entry] = when
        if self.handle is None:
            self.handle = self.loop.call_later(TICK, self._check)

    def remove(self, entry: "deadline") -> None:
        self.active.pop(entry, None)

    def _check(self) -> None:
        now = self.loop.time()
        for entry, when in list(self.active.items()):
            if when <= now:
                del self.active[entry]
                entry.expire()
        self.handle = self.loop.call_later(TICK, self._check) if self.active else None


_WATCHDOGS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog]" = weakref.WeakKeyDictionary()


class deadline:  # noqa: N801 - used like asyncio.timeout
    """`async with deadline(seconds): ...` — TimeoutError when the block runs too long."""

    __slots__ = ("seconds", "task", "expired", "_cancelling", "_precise", "_watchdog", "__weakref__")

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._precise: Any = None

    async def __aenter__(self) -> "deadline":
        if self.seconds <= PRECISE_UP_TO:
            self._precise = asyncio.timeout(self.seconds)
            await self._precise.__aenter__()
            return self
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None  # we are inside `async with`, so inside a task
        self.task = task
        self._cancelling = task.cancelling()
        watchdog = _WATCHDOGS.get(loop)
        if watchdog is None:
            watchdog = _WATCHDOGS[loop] = _Watchdog(loop)
        self._watchdog = watchdog
        watchdog.add(self, loop.time() + self.seconds)
        return self

    def expire(self) -> None:
        self.expired = True
        self.task.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self._precise is not None:
            return await self._precise.__aexit__(exc_type, exc, tb)  # type: ignore[no-any-return]
        self._watchdog.remove(self)
        if self.expired and exc_type is asyncio.CancelledError and self.task.uncancel() <= self._cancelling:
            raise TimeoutError from exc
        return None
