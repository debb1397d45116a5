"""The live runs of this server process, and who follows them.

A run's state (kind, name, principal, status, error, result, times, pending approvals,
cancellation) is its `Run`'s (engine/runtime/run.py): a `LiveRun` reads it there and keeps
none of it. The hub adds what a follower needs: the run's events in `seq` order (as the Run made them;
their SSE frames encoded once, when a follower first asks), so a follower can start from any
`seq` and gets every later event exactly once, live, until the run ends.

`RunHub` subscribes to the engine once, so it sees every run the engine executes — started
over HTTP, over MCP at `/mcp`, or by Python code in the same process — from its first event.
It takes each run whole (`Engine.subscribe`'s `for_run`): as the run opens, the Run is given
its LiveRun's deque's `append` as its listener, so recording an event costs no Python call;
a follower about to wait swaps that for `LiveRun.arrive`, which also wakes it (from any
thread). What the swap buys (issue 29): alone, under the 3 % a hot-path trick must buy (a
JSON call's bytecodes 6,572 with it, 6,740 without: 2.5 %; callgrind could not separate
them, ±1 %); but undoing it with the other tricks under 3 % cost the service about 5 % of its
requests/s (`python -m bench.service`, ABBA), which issue 29 forbids: it and `ServiceApp`
(front.py), the two largest of them, stay.

`arrive` as a Run's listener makes a reference cycle (the Run holds `arrive`, the LiveRun its
Run), which the LiveRun breaks as the run ends (`close` gives the Run the deque's `append`
back): a retired run is then freed at once, not left to the garbage collector, which
`skillyard serve` runs rarely. What that buys: with `arrive` for every event, 15,000 JSON
calls in process (`python -m bench.request_cost --one json 15000`, CPU time) took 2.5–2.6 s
with the cycle broken, 2.9–3.0 s without (≈ 15 %), though callgrind counted only 1.6 % more
instructions: the cost is in the memory a run leaves to the collector, not in instructions.
Events come in the order the Run numbered them, except that a worker thread's may
overtake another: readers take them through `LiveRun._settle`, which checks the order.

With a run store, memory holds only the newest LIVE_TAIL events of a run (and their frames):
the deque lets older ones go, and a follower that asks for them (one that joins late, or
falls behind) reads them from the store, flushed first, then goes on from memory. A long run
costs the same memory as a short one. Without a store memory is the only history: every
event stays, and `limits.max_events_per_run` bounds them.
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
from collections import OrderedDict, deque
from itertools import islice
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Coroutine

from ..errors import SkillyardError
from ..logging import logger
from ..runtime.events import Event, record_sink
from ..runtime.run import Run, RunKind, cancelled_error, end_status
from .sse import Final, event_frames, stored_frames

if TYPE_CHECKING:
    from ..runtime.run import Approver
    from ..store import Store

_SEQ = operator.attrgetter("seq")
CommitWait = Callable[[], "asyncio.Future[None] | None"]


def commit_wait(engine: Any) -> CommitWait | None:
    """What a front door's answer (JSON body, last SSE frame, MCP result) awaits after its run
    ended: the store's commit (`store.durability: committed`); None: no store, or `relaxed`."""
    store = getattr(engine, "store", None)
    durable = store is not None and engine.project.settings.store.durability != "relaxed"
    return store.committed if durable else None  # type: ignore[no-any-return]


# Finished runs kept in memory (the newest): without a store they are the only history there
# is. With one, every read of a run flushes the store first, so memory only saves a replay's
# trip to the database. And the runs kept cost every call, by their number rather than their
# size (dropping each kept run's Run object changed nothing), perhaps because a new run's
# objects are built in the memory the oldest kept one gives back, out of the processor's caches
# by then (not pinned down). bench.service at once, SQLite, 10 connections: keeping 256, JSON
# 0.52 and SSE 0.50; 16, 0.58 and 0.53 (docs/operations.md, "Throughput"). Measured again
# for issue 29 (one run each, load average 6–8): keeping 16, SQLite at once 0.55 · 0.49 ·
# 0.52 · 0.46 (10 JSON · 10 SSE · 100 JSON · 100 SSE); keeping 256, 0.49 · 0.45 · 0.50 · 0.42.
KEEP_FINISHED = 256
KEEP_FINISHED_WITH_STORE = 16
# The events of one run held in memory when there is a store (its newest; older ones are read
# from the store). A call of the shipped tools makes 10 to 50; triageFeedback at limits.max_items
# (1,000 items) about 12,000.
LIVE_TAIL = 1024
STORE_WAIT_S = 2.0  # how long a follower waits for the store to hold the next event memory let go


class LiveRun:
    """One run's newest events in memory, and who is waiting for more.

    The run's state (kind, name, principal, status, error, result, times, pending approvals)
    is its `Run`'s, read from it, never copied. Until the engine opens the run (its task's
    first step), a Run of the LiveRun's own stands in, made from what the run was started as
    when first asked for (most calls never ask: the engine's Run has opened by then).
    """

    __slots__ = ("run_id", "_run", "_asked", "records", "_frames", "_last", "_waiting", "_store", "_hub", "_waking", "_closed",
                 "task", "background", "_changed", "_commit")

    def __init__(self, run_id: str, kind: RunKind | None, name: str, *, principal: str | None = None,
                 store: "Store | None" = None, tail: int | None = None, run: "Run | None" = None,
                 commit: "CommitWait | None" = None):
        """`store`: where the events memory lets go are read back from; `tail`: how many it keeps
        then (None: all; without a store, all are kept). `run`: its Run, if it is open (else one
        stands in, made of `kind`, `name` and `principal`). `commit`: what an answer with the
        run's end waits for (`commit_wait`; None: it does not wait)."""
        self.run_id = run_id
        self._commit = commit
        self._run = run
        self._asked = (kind or "tool", name, principal)  # what it was started as: for a stand-in
        kept = tail if store is not None else None
        # The run's newest events as the Run made them (redacted, data encoded once), as they came:
        # the Run's listener for the hub is this deque's `append` (no Python call per event). Their
        # SSE frames are built when first asked for (a follower, a replay): most calls are answered
        # with their result and nobody asks.
        self.records: deque[Event] = deque(maxlen=kept)
        self._frames: deque[bytes] = deque(maxlen=kept)  # the frames of the settled events, in seq order
        self._last = 0  # the seq of the last settled (framed) event
        self._waiting = False  # an event came before one that is still on its way
        self._store = store
        self._hub: "RunHub | None" = None
        self._waking = False  # the Run delivers to `arrive` (a follower may wait), not to records.append
        self._closed = False  # the hub has taken the run's end (a run of another thread's loop: after its events)
        self.task: asyncio.Task[Any] | None = None  # set for runs this server started
        self.background = False
        self._changed: asyncio.Event | None = None  # made only when a follower waits

    # ─── the run's state: its Run's ──────────────────────────────────────────────

    @property
    def run(self) -> Run:
        """Its Run: the engine's once open; until then a stand-in (status `running`)."""
        run = self._run
        if run is None:
            kind, name, principal = self._asked
            run = self._run = Run(self.run_id, [], None, kind, name, principal, records=False)  # type: ignore[arg-type]
        return run

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

    @property
    def unrecorded(self) -> bool:
        """Whether an answer that carries the run's end must await `recorded()` first."""
        return self._commit is not None

    async def recorded(self) -> None:
        """Return once the run's events up to its end are committed (one commit with whatever
        else ended meanwhile); each caller awaits a future of its own (one that leaves cancels its own)."""
        if not self._closed:  # a run its task's end ends (never opened, crashed): the hub takes it one turn later
            await asyncio.sleep(0)
        commit = self._commit
        if commit is None:
            return
        future = commit()
        if future is not None:
            await future
        self._commit = None  # committed: a later answer (a replay from memory) does not wait again

    # ─── its events ──────────────────────────────────────────────────────────────

    @property
    def last_seq(self) -> int:
        self._settle()
        return self._last

    @property
    def events(self) -> list[dict[str, Any]]:
        """The events held in memory, in seq order, as their dicts (`Event.to_dict()`)."""
        self._settle()
        last = self._last
        held = {event.seq for event in list(self.records) if event.seq <= last}
        first = last + 1
        while first - 1 in held:  # the unbroken run of them that ends at the last one settled
            first -= 1
        return self.events_after(first - 1) or []

    @property
    def frames(self) -> list[bytes]:
        """The SSE frames of the events held in memory, in seq order, each encoded once."""
        self._settle()
        return list(self._frames)

    def frames_after(self, after: int) -> list[bytes] | None:
        """The frames of the events with seq > `after` that have come (in order, each encoded
        once); None when memory no longer holds the next one: the store does (`stored_frames`)."""
        self._settle()
        frames = self._frames
        count = self._last - max(0, after)
        if count <= 0:
            return []
        if count > len(frames):
            return None
        return list(islice(reversed(frames), count))[::-1]

    def events_after(self, after: int) -> list[dict[str, Any]] | None:
        """The dicts of the events with seq > `after` that have come; None when memory no longer
        holds them all (read them from the store)."""
        self._settle()
        last = self._last
        held = {event.seq: event for event in list(self.records) if after < event.seq <= last}
        if len(held) < last - max(0, after):
            return None
        return [held[seq].to_dict() for seq in sorted(held)]

    def _settle(self) -> None:
        """Frame the events that came since the last look: seq `_last` + 1, …, up to the first
        still on its way.

        Events come as the Run numbered them, except that one emitted by a worker thread (a
        threaded skill reporting progress) can overtake another, or be numbered and not yet
        here. The usual case is checked in C over the new ones only (the deque is read whole,
        and sorted, only when that check fails)."""
        records, last = self.records, self._last
        if not records:
            return
        count = records[-1].seq - last
        if not self._waiting:
            if count <= 0:
                return
            newest = list(islice(reversed(records), count + 1))  # one more: it must be settled already
            if len(newest) >= count and (len(newest) == count or newest[count].seq <= last) and \
                    list(map(_SEQ, newest[count - 1::-1])) == list(range(last + 1, last + count + 1)):
                self._add(newest[count - 1::-1], jumped=False)
                return
        self._settle_slowly(list(records), last)

    def _settle_slowly(self, held: list[Event], last: int) -> None:
        """`_settle` when events came out of order, or memory let some go before they were framed."""
        later = [event for event in held if event.seq > last]
        ordered = sorted({event.seq: event for event in later}.values(), key=_SEQ)
        if not ordered:
            self._waiting = False
            return
        first = ordered[0].seq
        # Memory let go of the events between: it is full, and holds none framed already (the store has them).
        jumped = first != last + 1 and len(later) == len(held) == self.records.maxlen
        if first != last + 1 and not jumped:
            self._waiting = True  # the next one is on its way
            return
        gap = next((at for at, event in enumerate(ordered) if event.seq != first + at), len(ordered))
        self._waiting = gap < len(ordered)
        self._add(ordered[:gap], jumped)

    def _add(self, events: list[Event], jumped: bool) -> None:
        if jumped:  # the frames held must be of consecutive events
            self._frames.clear()
        self._frames.extend(event_frames(events))
        self._last = events[-1].seq

    async def stored_frames(self, after: int) -> tuple[bytes, int] | None:
        """The frames after `after` that memory let go, read from the run store (flushed first:
        it then holds every event of the run so far), up to the first still on its way; with
        the seq of the last one. None when there is no store, or it failed (logged)."""
        store = self._store
        if store is None:
            return None

        def read() -> list[dict[str, Any]]:
            store.flush()
            return store.events(self.run_id, after_seq=after)

        try:
            events = await asyncio.to_thread(read)
        except Exception as exc:  # noqa: BLE001 - a store that fails ends the follower's stream, not the server
            logger.error("server: the run store could not give a follower a run's older events", run_id=self.run_id,
                         error=f"{type(exc).__name__}: {exc}")
            return None
        count = next((at for at, event in enumerate(events) if event["seq"] != after + at + 1), len(events))
        return b"".join(stored_frames(events[:count])), after + count

    # ─── the hub's side ──────────────────────────────────────────────────────────

    def open(self, run: "Run", hub: "RunHub") -> Callable[[Event], None]:
        """Its Run has opened (it takes the stand-in's place); `hub` wakes its followers. The
        Run's listener for this LiveRun: `records.append`, or `arrive` once a follower waits."""
        self._run, self._hub = run, hub
        return self.arrive if self._waking else self.records.append

    def arrive(self, event: Event) -> None:
        """The Run's listener while a follower may wait: keep the event, and wake the follower (on
        the hub's loop)."""
        self.records.append(event)
        if self._changed is not None and self._hub is not None:
            self._hub.wake(self)

    def _wake_followers(self) -> None:
        """From now on, an event wakes whoever waits (until now the Run appended it, silently)."""
        if not self._waking:
            self._waking = True
            if self._run is not None:  # (not open yet: `open` gives it `arrive` then)
                self._run.redirect(self.records.append, self.arrive)

    def notify(self) -> None:
        """Wake every follower waiting for a change (call on the hub's loop)."""
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def close(self) -> None:
        """Its Run has ended, and the hub has its events: wake every follower, and give the Run
        the deque's `append` back if a follower made it `arrive` (see the module's docstring: the cycle)."""
        if not self._closed:
            self._closed = True
            if self._waking and self._run is not None:
                self._run.redirect(self.arrive, self.records.append)
            self.notify()

    async def follow(self, after: int = 0, *, heartbeat: float | None = None) -> AsyncIterator[bytes | None]:
        """The frames of every event with seq > `after`, live until the run ends (those memory
        let go read from the store); `None` after `heartbeat` seconds without one (time for a
        keep-alive)."""
        sent = max(0, after)  # the seq of the last event given out
        loop = asyncio.get_running_loop()
        stuck_since: float | None = None  # since when the store has not had the next event memory let go
        while True:
            done = self.done
            if done and self._commit is not None:  # the run's last frame goes out once the run is committed
                await self.recorded()
            records = self.records
            newest = records[-1] if records else None
            frames = self.frames_after(sent)
            if frames is None:
                stored = await self.stored_frames(sent)
                if stored is None:
                    return
                chunk, last = stored
                if last > sent:
                    sent, stuck_since = last, None
                    yield chunk
                    continue
                now = loop.time()  # the next one was numbered, and is not in the store yet: it is on its way
                stuck_since = stuck_since or now
                if now - stuck_since > STORE_WAIT_S:
                    logger.error("server: a follower's next event is neither in memory nor in the store", run_id=self.run_id,
                                 after=sent)
                    return
                await asyncio.sleep(0.02)
                continue
            if frames:  # every frame that is ready, in one write: far fewer sends under load
                sent += len(frames)
                chunk = frames[0] if len(frames) == 1 else b"".join(frames)
                if done and not self._waiting:  # the run's last event: end the response in the same write
                    yield Final(chunk)  # (an event still on its way is not waited for)
                    return
                yield chunk
            if done:
                return
            changed = self._changed
            if changed is None:
                changed = self._changed = asyncio.Event()
                self._wake_followers()
                if (records[-1] if records else None) is not newest:  # one came from a worker thread meanwhile
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
