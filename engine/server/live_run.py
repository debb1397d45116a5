"""One live run of this server process: its newest events, and who is waiting for more.

The hub (hub.py) takes each run whole: as the run opens, the Run is given its LiveRun's deque's `append` as its listener, so recording an event costs no Python call;
a follower about to wait swaps that for `LiveRun.arrive`, which also wakes it (from any
thread). What the swap buys: alone, less than the 3 % a hot-path trick must buy to stay (a
JSON call's bytecodes 6,572 with it, 6,740 without: 2.5 %; callgrind could not separate
them, ±1 %); but undoing it with the other tricks under 3 % cost the service about 5 % of its
requests/s (`python -m bench.service`, ABBA), and the service may not get slower: it and
`ServiceApp` (front.py), the two largest of them, stay.

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
"""

from __future__ import annotations

import asyncio
import operator
from collections import deque
from itertools import islice
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Protocol

from ..logging import logger
from ..runs.events import Event
from ..runs.run import Run, RunKind
from .sse import Final, event_frames, stored_frames

if TYPE_CHECKING:
    from .._engine import Engine
    from ..store import Store

_SEQ = operator.attrgetter("seq")
CommitWait = Callable[[], "asyncio.Future[None] | None"]


class Waker(Protocol):
    """What a LiveRun needs of the hub (hub.py, which imports this module): waking its followers."""

    def wake(self, live: "LiveRun") -> None: ...


def commit_wait(engine: "Engine") -> CommitWait | None:
    """What a front door's answer (JSON body, last SSE frame, MCP result) awaits after its run
    ended: the store's commit (`store.durability: committed`); None: no store, or `relaxed`."""
    store = engine.store
    if store is None or engine.project.settings.store.durability == "relaxed":
        return None
    return store.committed


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
        self._hub: Waker | None = None
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
            run = self._run = Run(self.run_id, [], None, kind, name, principal, records=False)
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

    def open(self, run: "Run", hub: Waker) -> Callable[[Event], None]:
        """Its Run has opened (it takes the stand-in's place); `hub` wakes its followers. The
        Run's listener for this LiveRun: `records.append`, or `arrive` once a follower waits."""
        self._run, self._hub = run, hub
        if self._waking:
            run.watchers += 1
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
                self._run.watchers += 1  # someone watches: the agent loop streams the model's next answers
                self._run.redirect(self.records.append, self.arrive)

    def watch(self) -> None:
        """A follower is on its way (an SSE answer): the run is watched from its first event, so
        its model answers stream from the first one (`Run.watchers`)."""
        self._wake_followers()

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
