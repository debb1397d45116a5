"""The live runs of this server process, and who follows them.

A run's state (kind, name, principal, status, error, result, times, pending approvals,
cancellation) is its `Run`'s (engine/runtime/run.py): a `LiveRun` reads it there and keeps
none of it. The hub adds what a follower needs: the run's events in `seq` order (as the Run made them;
their SSE frames encoded once, when a follower first asks), so a follower can start from any
`seq` and gets every later event exactly once, live, until the run ends.

`RunHub` subscribes to the engine once, so it sees every run the engine executes — started
over HTTP, over MCP at `/mcp`, or by Python code in the same process — from its first event.
It takes each run whole (`Engine.subscribe`'s `for_run`): as the run opens, the Run is given
its LiveRun's list's `append` as its listener, so recording an event costs no Python call;
a follower about to wait swaps that for `LiveRun.arrive`, which also wakes it (from any
thread). Events come in the order the Run numbered them, except that a worker thread's may
overtake another: readers take them through `LiveRun._settled`, which checks the order.
Finished runs stay a while (the newest `keep_finished`: few when there is a run store) so a
client that reconnects right after the end still resumes from memory; older ones are served
from the run store.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import operator
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Coroutine

from ..errors import SkillyardError
from ..logging import logger
from ..runtime.events import Event, record_sink
from ..runtime.run import Run, RunKind, cancelled_error, end_status
from .sse import Final, event_frames

if TYPE_CHECKING:
    from ..runtime.run import Approver

_get_ident = threading.get_ident
_SEQ = operator.attrgetter("seq")


# Finished runs kept in memory (the newest): without a store they are the only history there
# is. With one, every read of a run flushes the store first, so memory only saves a replay's
# trip to the database. And the runs kept cost every call, by their number rather than their
# size (dropping each kept run's Run object changed nothing), perhaps because a new run's
# objects are built in the memory the oldest kept one gives back, out of the processor's caches
# by then (not pinned down). bench.service at once, SQLite, 10 connections: keeping 256, JSON
# 0.52 and SSE 0.50; 16, 0.58 and 0.53 (docs/operations.md, "Throughput").
KEEP_FINISHED = 256
KEEP_FINISHED_WITH_STORE = 16


class LiveRun:
    """One run's events in memory, and who is waiting for more.

    The run's state (kind, name, principal, status, error, result, times, pending approvals)
    is its `Run`'s, read from it, never copied: until the engine opens the run, a Run of the
    LiveRun's own stands in (status `running`); the engine's takes its place as it opens.
    """

    __slots__ = ("run_id", "run", "records", "_dicts", "_frames", "_in_order", "_ordered", "_hub", "_waking",
                 "_closed", "task", "background", "_changed")

    def __init__(self, run_id: str, kind: RunKind | None, name: str, *, principal: str | None = None,
                 run: "Run | None" = None):
        """`run`: its Run, if it is open (else one stands in, made of `kind`, `name` and `principal`)."""
        self.run_id = run_id
        self.run: Run = Run(run_id, [], None, kind or "tool", name, principal, records=False) if run is None else run
        # The run's events as the Run made them (redacted, data encoded once), as they came: the
        # Run's listener for the hub is this list's `append` (no Python call per event). Their
        # dicts and SSE frames are built when first asked for (a follower, a replay): most calls
        # are answered with their result and nobody asks.
        self.records: list[Event] = []
        self._dicts: list[dict[str, Any]] = []
        self._frames: list[bytes] = []
        self._in_order = 0  # records[:_in_order] are seq 1.._in_order (checked)
        self._ordered: list[Event] | None = None  # when some came out of order: them sorted, up to a gap
        self._hub: "RunHub | None" = None
        self._waking = False  # the Run delivers to `arrive` (a follower may wait), not to records.append
        self._closed = False  # the hub has taken the run's end (a run of another thread's loop: after its events)
        self.task: asyncio.Task[Any] | None = None  # set for runs this server started
        self.background = False
        self._changed: asyncio.Event | None = None  # made only when a follower waits

    # ─── the run's state: its Run's ──────────────────────────────────────────────

    @property
    def kind(self) -> str:
        return self.run.kind

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def principal(self) -> str | None:
        """The key name that started it; None: not started over HTTP (admins only)."""
        return self.run.principal

    @property
    def status(self) -> str:
        return self.run.status

    @property
    def error(self) -> dict[str, Any] | None:
        return self.run.error

    @property
    def started_at(self) -> int:
        return self.run.started_at

    @property
    def finished_at(self) -> int | None:
        return self.run.finished_at

    @property
    def result(self) -> Any:
        """The Run's result as JSON: a tool run's ToolResult as its dict, an agent's answer."""
        result = self.run.result
        to_dict = getattr(result, "to_dict", None)
        return to_dict() if callable(to_dict) else result

    @property
    def pending_approvals(self) -> list[str]:
        return self.run.pending_approvals

    @property
    def done(self) -> bool:
        """The hub has the run's end (and, for a run of another thread's loop, every event before it)."""
        return self._closed

    # ─── its events ──────────────────────────────────────────────────────────────

    @property
    def last_seq(self) -> int:
        return len(self._settled())

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event so far as its dict (`Event.to_dict()`), each built once."""
        dicts, settled = self._dicts, self._settled()
        if len(dicts) < len(settled):
            dicts.extend(map(Event.to_dict, settled[len(dicts):]))
        return dicts

    @property
    def frames(self) -> list[bytes]:
        """Every event so far as its SSE frame, each encoded once (around the Run's encoded data)."""
        frames, settled = self._frames, self._settled()
        if len(frames) < len(settled):
            frames.extend(event_frames(settled[len(frames):]))
        return frames

    def _settled(self) -> list[Event]:
        """The events to give out: seq 1, 2, … up to the first still on its way.

        Events come as the Run numbered them, except that one emitted by a worker thread (a
        threaded skill reporting progress) can overtake another, or be numbered and not yet
        here: checked in C over the new ones; when that happens, the run's events are sorted
        (a copy) from then on."""
        records = self.records
        count = len(records)  # an off-thread append may land after this: checked next time
        if self._ordered is None:
            checked = self._in_order
            if checked == count or list(map(_SEQ, records[checked:count])) == list(range(checked + 1, count + 1)):
                self._in_order = count
                return records if count == len(records) else records[:count]
        ordered = sorted({event.seq: event for event in records[:count]}.values(), key=_SEQ)
        gap = next((at for at, event in enumerate(ordered) if event.seq != at + 1), len(ordered))
        self._ordered = ordered[:gap]
        return self._ordered

    # ─── the hub's side ──────────────────────────────────────────────────────────

    def open(self, run: "Run", hub: "RunHub") -> Callable[[Event], None]:
        """Its Run has opened (it takes the stand-in's place); `hub` wakes its followers. The
        Run's listener for this LiveRun: `records.append`, or `arrive` once a follower waits."""
        self.run, self._hub = run, hub
        return self.arrive if self._waking else self.records.append

    def arrive(self, event: Event) -> None:
        """The Run's listener while a follower may wait: the event, and a wake-up on the loop."""
        self.records.append(event)
        if self._changed is not None and self._hub is not None:
            self._hub.wake(self)

    def _wake_followers(self) -> None:
        """From now on, an event wakes whoever waits (until now the Run appended it, silently)."""
        if not self._waking:
            self._waking = True
            self.run.redirect(self.records.append, self.arrive)  # (the stand-in: no-op; `open` gives `arrive`)

    def notify(self) -> None:
        """Wake every follower waiting for a change (call on the hub's loop)."""
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def close(self) -> None:
        """Its Run has ended, and the hub has its events: wake every follower."""
        if not self._closed:
            self._closed = True
            self.notify()

    async def follow(self, after: int = 0, *, heartbeat: float | None = None, as_frames: bool = True) -> AsyncIterator[Any]:
        """Every event with seq > `after`, live until the run ends; `None` after `heartbeat`
        seconds without one (time for a keep-alive)."""
        index = max(0, after)
        while True:
            done = self.done
            seen = len(self.records)
            if as_frames:  # every frame that is ready, in one write: far fewer sends under load
                frames = self.frames
                end = len(frames)
                if index < end:
                    chunk = frames[index] if end - index == 1 else b"".join(frames[index:end])
                    index = end
                    if done and index == seen:  # (an event still on its way is not waited for)
                        yield Final(chunk)  # the run's last event: end the response in the same write
                        return
                    yield chunk
            else:
                events = self.events
                while index < len(events):
                    yield events[index]
                    index += 1
            if done:
                return
            changed = self._changed
            if changed is None:
                changed = self._changed = asyncio.Event()
                self._wake_followers()
                if len(self.records) != seen:  # one came from a worker thread meanwhile
                    continue
            if heartbeat is None:
                await changed.wait()
                continue
            try:
                await asyncio.wait_for(changed.wait(), heartbeat)
            except TimeoutError:
                yield None

    def summary(self) -> dict[str, Any]:
        run = self.run
        started, finished = run.started_at, run.finished_at
        return {
            "id": self.run_id,
            "kind": run.kind,
            "name": run.name,
            "status": run.status,
            "started_at": started,
            "finished_at": finished,
            "duration_ms": None if finished is None else finished - started,
            "error": run.error,
            "principal": run.principal,
            "live": not self.done,
            "pending_approvals": run.pending_approvals,
        }


class TooManyRuns(SkillyardError):
    """The service, or one key, has as many live runs as it may: retry when one has ended."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class RunHub:
    def __init__(
        self, engine: Any, *, keep_finished: int | None = None, approval_timeout: float = 600.0,
        max_live: int | None = None, max_live_per_principal: int | None = None,
    ):
        """`keep_finished` None: KEEP_FINISHED, or KEEP_FINISHED_WITH_STORE if `engine` has a store."""
        self.engine = engine
        if keep_finished is None:
            keep_finished = KEEP_FINISHED if engine.store is None else KEEP_FINISHED_WITH_STORE
        self.keep_finished = keep_finished
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

    # ─── lifecycle ───────────────────────────────────────────────────────────────

    def attach(self) -> None:
        """Start observing the engine (call from the server's event loop)."""
        if self._unsubscribe is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._unsubscribe = self.engine.subscribe(self.listener, for_run=self.for_run)

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

    def for_run(self, run: "Run") -> Callable[[Event], None]:
        """The listener of one run's events, given as the run opens (Engine.subscribe): its
        LiveRun's `records.append`, no Python call per event. A follower that waits makes the
        Run deliver to `LiveRun.arrive` instead, which wakes it."""
        if _get_ident() != self._thread:
            return self._opened_elsewhere(run)
        live = self.runs.get(run.run_id)
        if live is None:  # not started here (MCP, Python code in this process)
            live = self._add(LiveRun(run.run_id, run.kind, run.name, run=run))
        run.on_end(functools.partial(self._run_ended, live))
        return live.open(run, self)

    def _opened_elsewhere(self, run: "Run") -> Callable[[Event], None]:
        """A run opened by another thread's loop: its LiveRun, events and end are taken on this
        loop, in the order they came (call_soon_threadsafe keeps it)."""
        loop = self._loop
        assert loop is not None
        live = LiveRun(run.run_id, run.kind, run.name, run=run)
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
        if _get_ident() == self._thread:
            live.notify()
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(live.notify)

    def _run_ended(self, live: LiveRun, run: "Run") -> None:
        live.close()
        if live.task is None:  # not ours: nothing else will retire it
            self._retire(live)

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
        live = self.runs[run_id] = LiveRun(run_id, kind, name, principal=principal)
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
        if task.cancelled():
            live.run.finish("cancelled", error=cancelled_error())  # (each a no-op when the Run has ended)
        elif (exc := task.exception()) is not None:
            logger.error("server: run failed", run_id=live.run_id, error=f"{type(exc).__name__}: {exc}")
            live.run.crash(exc)
        else:
            live.run.finish(end_status(None))
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
