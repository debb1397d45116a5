"""Answers that wait for a commit (`store.durability: committed`, the default).

A front door releases a call's answer only once the run's events are committed: it asks the
writer for a future (`Writer.committed`) after the run has ended, and the writer sets it after
the commit that holds them. No run is named: the future waits for the first spill that starts
after it was asked for, which takes every run ended (and every event queued) before, so one
counter serves every waiter and a commit releases all the answers whose runs it holds (group
commit: calls that end together share one commit). Asking wakes the writer: the added latency
is one commit, not a tick of the writer. The first answer of a turn of the event loop asks
for the wake-up at that turn's end (`loop.call_soon`), once for all the answers of the turn:
they share one spill and one commit (the writer woken by the first would commit it alone).

The writer thread sets the futures through `call_soon_threadsafe`, once per event loop per
commit, not once per answer.
"""

from __future__ import annotations

import asyncio
from collections import deque


class CommitWaiters:
    """Futures waiting for a spill to be committed, each with the number of that spill."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        # (spill number, future): appended by event loops, taken by the writer thread (deque: atomic ends)
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def add(self, spill: int) -> "asyncio.Future[None]":
        """A future set once spill number `spill` (and every one before it) is committed."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((spill, future))
        return future

    def release(self, committed: int | None) -> None:
        """Set the futures of spills up to `committed` (None: all of them: the store closed, or
        its database is out of reach). Called by the writer thread."""
        waiting = self._waiting
        ready: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for _ in range(len(waiting)):
            item = waiting.popleft()
            if committed is None or item[0] <= committed:
                future = item[1]
                ready.setdefault(future.get_loop(), []).append(future)
            else:
                waiting.append(item)  # a later spill's: the next commit's
        for loop, futures in ready.items():
            try:
                loop.call_soon_threadsafe(_set_all, futures)
            except RuntimeError:  # its loop is closed: nobody awaits them any more
                pass


def _set_all(futures: list["asyncio.Future[None]"]) -> None:
    for future in futures:
        if not future.done():  # (cancelled: its answer was given up)
            future.set_result(None)
