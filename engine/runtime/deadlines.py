"""Time limits that cost almost nothing per call.

`asyncio.timeout` schedules one timer per call; with the long limits tools usually have
(minutes), the cancelled timers pile up in the loop's heap and each call pays ~15-20 µs.
`deadline(seconds)` keeps long limits in one watchdog per event loop that wakes every
`TICK` seconds and cancels the calls that are over time, so a limit of 300 s is enforced
within 0.1 s. Short limits (≤ `PRECISE_UP_TO`) get their own timer, exactly.
Either way an expired limit raises `TimeoutError` in the caller, like `asyncio.timeout`.

It is a plain (synchronous) context manager used inside a coroutine, `with deadline(s):`,
because arming a limit never needs to wait; that saves two coroutine objects per call.
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

    def __init__(self) -> None:
        self.active: dict[deadline, float] = {}
        self.scheduled = False  # a flag, not the timer handle: a handle would keep the loop alive

    def add(self, entry: "deadline", when: float, loop: asyncio.AbstractEventLoop) -> None:
        self.active[entry] = when
        if not self.scheduled:
            loop.call_later(TICK, self._check)
            self.scheduled = True

    def remove(self, entry: "deadline") -> None:
        self.active.pop(entry, None)

    def _check(self) -> None:
        loop = asyncio.get_running_loop()  # the watchdog holds no reference to its loop, so the loop can die
        now = loop.time()
        for entry, when in list(self.active.items()):
            if when <= now:
                del self.active[entry]
                entry.expire()
        self.scheduled = bool(self.active)
        if self.scheduled:
            loop.call_later(TICK, self._check)


_WATCHDOGS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog]" = weakref.WeakKeyDictionary()
_last: "tuple[weakref.ref[asyncio.AbstractEventLoop], _Watchdog] | None" = None  # usually one loop: skip the dictionary


def _watchdog(loop: asyncio.AbstractEventLoop) -> _Watchdog:
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    found = _WATCHDOGS.get(loop)
    if found is None:
        found = _WATCHDOGS[loop] = _Watchdog()
    _last = (weakref.ref(loop), found)
    return found


class deadline:  # noqa: N801 - used like asyncio.timeout
    """`with deadline(seconds): await ...` inside a task — TimeoutError when it runs too long."""

    __slots__ = ("seconds", "task", "expired", "_cancelling", "_timer", "_watchdog", "__weakref__")
    task: asyncio.Task[Any]
    _timer: asyncio.TimerHandle | None  # up to PRECISE_UP_TO seconds: a timer of its own
    _watchdog: _Watchdog | None  # longer: the loop's watchdog

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False

    def __enter__(self) -> "deadline":
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("deadline() must be used inside a task")
        self.task = task
        self._cancelling = task.cancelling()
        if self.seconds <= PRECISE_UP_TO:
            self._watchdog = None
            self._timer = loop.call_later(self.seconds, self.expire)
        else:
            self._timer = None
            self._watchdog = _watchdog(loop)
            self._watchdog.add(self, loop.time() + self.seconds, loop)
        return self

    def expire(self) -> None:
        self.expired = True
        self.task.cancel()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        elif self._watchdog is not None:
            self._watchdog.remove(self)
        if self.expired and exc_type is asyncio.CancelledError and self.task.uncancel() <= self._cancelling:
            raise TimeoutError from exc
