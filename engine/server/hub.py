"""The live runs of this server process, and who follows them.

A run's state (kind, name, principal, status, error, result, times, pending approvals,
cancellation) is its `Run`'s (engine/runs/run.py): a `LiveRun` reads it there and keeps
none of it. The hub adds what a follower needs: the run's events in `seq` order (as the Run made them;
their SSE frames encoded once, when a follower first asks), so a follower can start from any
`seq` and gets every later event exactly once, live, until the run ends.

`RunHub` subscribes to the engine once, so it sees every run the engine executes — started
over HTTP, over MCP at `/mcp`, or by Python code in the same process — from its first event.
It is a RunSink (engine/runs/sinks.py): it takes each run whole as it opens and gives it a `LiveRun`
(live_run.py), which holds its newest events and wakes its followers.
Finished runs stay a while (the newest `keep_finished`: few when there is a run store) so a
client that reconnects right after the end still resumes from memory; older ones are served
from the run store.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from ..errors import SkillyardError
from ..logging import logger
from ..runs.events import Event, record_sink
from ..runs.run import Run, RunKind, cancelled_error, end_status
from .live_run import LIVE_TAIL, LiveRun, commit_wait

if TYPE_CHECKING:
    from ..runs.run import Approver

__all__ = ["KEEP_FINISHED", "KEEP_FINISHED_WITH_STORE", "LiveRun", "RunHub", "TooManyRuns", "commit_wait"]


# Finished runs kept in memory (the newest): without a store they are the only history there
# is. With one, every read of a run flushes the store first, so memory only saves a replay's
# trip to the database. And the runs kept cost every call, by their number rather than their
# size (dropping each kept run's Run object changed nothing), perhaps because a new run's
# objects are built in the memory the oldest kept one gives back, out of the processor's caches
# by then (not pinned down). bench.service at once, SQLite, 10 connections: keeping 256, JSON
# 0.52 and SSE 0.50; 16, 0.58 and 0.53 (docs/operations.md, "Throughput"). Measured again
# later (one run each, load average 6–8): keeping 16, SQLite at once 0.55 · 0.49 ·
# 0.52 · 0.46 (10 JSON · 10 SSE · 100 JSON · 100 SSE); keeping 256, 0.49 · 0.45 · 0.50 · 0.42.
KEEP_FINISHED = 256
KEEP_FINISHED_WITH_STORE = 16


class TooManyRuns(SkillyardError):
    """The service, or one key, has as many live runs as it may: retry when one has ended."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class RunHub:
    """The server's RunSink: every run of the engine, whoever started it, with its followers."""

    wants_records = True  # the Run encodes each event's data as it is emitted: a frame built later is built around it

    def __init__(
        self, engine: Any, *, keep_finished: int | None = None, approval_timeout: float = 600.0,
        max_live: int | None = None, max_live_per_principal: int | None = None, tail: int = LIVE_TAIL,
    ):
        """`keep_finished` None: KEEP_FINISHED, or KEEP_FINISHED_WITH_STORE if `engine` has a store.
        `tail`: the events of a run held in memory when `engine` has a store (the others: all)."""
        self.engine = engine
        if keep_finished is None:
            keep_finished = KEEP_FINISHED if engine.store is None else KEEP_FINISHED_WITH_STORE
        self.keep_finished = keep_finished
        self.tail = tail
        self.approval_timeout = approval_timeout
        self.max_live = max_live
        self.max_live_per_principal = max_live_per_principal
        self.runs: "OrderedDict[str, LiveRun]" = OrderedDict()
        self._finished: "OrderedDict[str, None]" = OrderedDict()
        self._started_live: dict[str | None, int] = {}  # live runs this server started, per principal
        self._started_total = 0  # their sum
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.commit = commit_wait(engine)  # what answers wait for (store.durability), read once: the store is opened once

    # ─── lifecycle ───────────────────────────────────────────────────────────────

    def attach(self) -> None:
        """Start observing the engine (call from the server's event loop)."""
        if self._unsubscribe is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._unsubscribe = self.engine.add_sink(self)

    async def detach(self) -> None:
        """Stop observing; cancel the runs this server started and wait for them."""
        if self._unsubscribe is not None:
            with contextlib.suppress(ValueError):
                self._unsubscribe()
            self._unsubscribe = None
        tasks = [run.task for run in self.runs.values() if run.task is not None and not run.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    # ─── recording ───────────────────────────────────────────────────────────────

    def open(self, run: "Run") -> Callable[[Event], None]:
        """The listener of one run's events, given as the run opens (RunSink): its
        LiveRun's `records.append`, no Python call per event. A follower that waits makes the
        Run deliver to `LiveRun.arrive` instead, which wakes it."""
        if threading.get_ident() != self._thread:
            return self._opened_elsewhere(run)
        live = self.runs.get(run.run_id)
        if live is None:  # not started here (MCP, Python code in this process)
            live = self._add(self._live(run.run_id, run=run))
        run.on_end(functools.partial(self._run_ended, live))
        return live.open(run, self)

    def _opened_elsewhere(self, run: "Run") -> Callable[[Event], None]:
        """A run opened by another thread's loop: its LiveRun, events and end are taken on this
        loop, in the order they came (call_soon_threadsafe keeps it)."""
        loop = self._loop
        assert loop is not None
        live = self._live(run.run_id, run=run)
        live.open(run, self)
        loop.call_soon_threadsafe(self._add, live)
        run.on_end(lambda run: loop.call_soon_threadsafe(self._run_ended, live, run))
        return self.listener

    @record_sink  # the Run encodes each event's data as it is emitted: a frame built later is built around it
    def listener(self, event: Event) -> None:
        """The listener of runs opened by another thread's loop: each event is taken on this loop."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._record, event)

    def _record(self, event: Event) -> None:
        live = self.runs.get(event.run_id)
        if live is not None:
            live.arrive(event)

    def wake(self, live: LiveRun) -> None:
        """Wake the followers of `live`, from any thread."""
        if threading.get_ident() == self._thread:
            live.notify()
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(live.notify)

    def _run_ended(self, live: LiveRun, run: "Run") -> None:
        live.close()
        if live.task is None:  # not ours: nothing else will retire it
            self._retire(live)

    def _live(self, run_id: str, kind: RunKind | None = None, name: str = "", principal: str | None = None,
              run: "Run | None" = None) -> LiveRun:
        return LiveRun(run_id, kind, name, principal=principal, store=self.engine.store, tail=self.tail, run=run,
                       commit=self.commit)

    def _add(self, live: LiveRun) -> LiveRun:
        self.runs[live.run_id] = live
        return live

    def _retire(self, live: LiveRun) -> None:
        self._finished[live.run_id] = None
        while len(self._finished) > self.keep_finished:
            old, _ = self._finished.popitem(last=False)
            self.runs.pop(old, None)

    # ─── runs this server starts ─────────────────────────────────────────────────

    def start(
        self,
        run_id: str,
        kind: RunKind,
        name: str,
        work: Callable[[], Coroutine[Any, Any, Any]],
        *,
        principal: str | None = None,
        background: bool = False,
    ) -> LiveRun:
        """Register the run, then start `work()` (a coroutine function, or a partial of one:
        no wrapper coroutine per call) as a task that outlives the request.

        Raises TooManyRuns when the service or `principal` is at its cap of live runs."""
        self.reserve(principal)
        live = self.runs[run_id] = self._live(run_id, kind, name, principal)
        store = self.engine.store
        if store is not None and principal is not None:
            store.record_owner(run_id, principal)
        live.background = background
        live.task = task = asyncio.get_running_loop().create_task(work(), name=f"skillyard-run-{run_id}")
        task.add_done_callback(functools.partial(self._ended, live, principal))
        return live

    def reserve(self, principal: str | None) -> None:
        """Count one more live run of `principal` against the caps (TooManyRuns when at one);
        `release` it when the run ends. `start` does both; a front door that runs calls
        itself (`/mcp`) calls them around each call."""
        mine = self._started_live.get(principal, 0)
        self._check_capacity(mine)
        self._started_live[principal] = mine + 1
        self._started_total += 1

    def release(self, principal: str | None) -> None:
        self._started_total -= 1
        left = self._started_live.get(principal, 1) - 1
        if left:
            self._started_live[principal] = left
        else:
            self._started_live.pop(principal, None)

    def _check_capacity(self, mine: int) -> None:
        """`mine`: the live runs of the principal asking for one more."""
        if self.max_live is not None and self._started_total >= self.max_live:
            raise TooManyRuns(f"this service runs {self.max_live} runs at once (server.max_live_runs); "
                              "retry when one has ended")
        if self.max_live_per_principal is not None and mine >= self.max_live_per_principal:
            raise TooManyRuns(f"this key has {self.max_live_per_principal} live runs (server.max_live_runs_per_key); "
                              "retry when one has ended")

    def _ended(self, live: LiveRun, principal: str | None, task: "asyncio.Task[Any]") -> None:
        """The task of a run this server started is done (`principal` reserved it): a Run its
        work did not end (or never opened) ends here, as cancelled or crashed."""
        self.release(principal)
        exc = None if task.cancelled() else task.exception()
        if exc is not None:
            logger.error("server: run failed", run_id=live.run_id, error=f"{type(exc).__name__}: {exc}")
        if not live.done:  # its Run has not ended: its work never opened it, or left it open
            run = live.run
            if task.cancelled():
                run.finish("cancelled", error=cancelled_error())
            elif exc is not None:
                run.crash(exc)
            else:
                run.finish(end_status(None))
            live.close()
        self._retire(live)

    def approver(self, run_id: str) -> "Approver":
        """The approver of a run started over HTTP: it asks nobody, so the Run waits for an
        answer through `POST /v1/runs/{id}/approvals/{tool_call_id}` (on any replica: the
        pending approval is kept in the store), up to the approval timeout."""
        return functools.partial(self._wait_for_answer, run_id)  # made for every call, used by few

    async def _wait_for_answer(self, run_id: str, tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
        store = getattr(self.engine, "store", None)
        if store is not None:
            store.set_approval(run_id, tool_call_id, "pending")
        try:
            await asyncio.sleep(self.approval_timeout)
            return False
        finally:  # answered (this task is then cancelled), timed out, or the run ended
            if store is not None:
                store.set_approval(run_id, tool_call_id, "closed")

    def cancel(self, run_id: str) -> bool:
        run = self.engine.runs.get(run_id)
        if run is not None:
            return run.cancel()
        live = self.runs.get(run_id)  # started, but its Run is not open yet
        if live is None or live.task is None or live.task.done():
            return False
        live.task.cancel()
        return True

    @property
    def started_live(self) -> int:
        """Live runs this server started (the running total its caps check)."""
        return self._started_total

    def live_count(self) -> int:
        return sum(1 for run in self.runs.values() if not run.done)
