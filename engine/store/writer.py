"""The store's writer: takes events, spills them into ready rows, and a thread that writes them.

The Engine gives each run a list of its own (`for_run`, `open_buffer`): the Run's listener for
the store is that list's `append`, a C call, and at the run's end the list is handed back whole
(`take_run`). Events fed one by one (`listener`: a store used by hand, a Temporal worker, an
event after its run's end) are appended to a queue. Every event here is redacted already (by
its Run, or at the store's entry: redacting.py).

Every SPILL_RUNS runs ended (or SPILL_EVENTS queued events) the writer "spills" them: the
events become ready rows (ready.py: plain column values, C calls only, and the few rows that
events imply), and the event objects can die. Holding them longer would make the garbage
collector run (they are allocations that are not freed) and promote them to its oldest
generation, whose growth sets off full collections: pauses of tens or hundreds of ms on the
event loop. The writer thread wakes every FLUSH_INTERVAL_S, spills what is left (and the
events so far of runs in flight for longer than the dialect's `HOLD_BACK_MS`), and hands the
rows to the database: one transaction per batch, nothing for the database to parse. A run's
events are stored in `seq` order even when it fails or is cancelled.

A database that cannot be reached for a while (a server restarting: `StoreUnavailable` from the
dialect) loses nothing: the writer keeps the batches, in order, and tries again with backoff;
flush() says so at once (StoreError). Past MAX_PENDING_EVENTS kept events, the oldest are
dropped and counted (`unavailable`). The thread also writes the small writes beside the events
(who started a run, approvals: `add_side`) first in the next events' transaction (one commit,
not two: a commit is the dearest step of a small batch), and gives the dialect its tick for
the lease (`Database.housekeeping`: heartbeats).

Spills are numbered, and the thread knows up to which one everything is committed: an answer
that must wait for its run's commit (`committed`, commits.py) waits for the first spill after
its run ended, and wakes the thread at the end of the event loop's turn (group commit).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import orjson

from ..logging import logger
from ..runtime.events import Event, record_sink
from .commits import CommitWaiters
from .database import RETRY_MAX_S, Database, Statement
from .errors import StoreError, StoreUnavailable
from .failures import Failures
from .ready import RowMaker
from .rows import EVENT_WIDTH, Batch
from .schema import EVENTS_CHANNEL

if TYPE_CHECKING:
    from ..runtime.run import Run
    from .notices import LocalNotices

FLUSH_INTERVAL_S = 0.05  # the writer wakes this often: what was queued by then is committed
SPILL_EVENTS = 256  # the listener spills the queue at this length (~550 objects: no collection is set off)
SPILL_RUNS = 16  # runs handed over whole (take_run) that set off a spill: about as many events
STATEMENT_EVENTS = 2_000  # events per INSERT (one transaction): the write lock is held for one of them
MAX_PENDING_EVENTS = 100_000  # kept while the database cannot be reached; older ones are dropped and counted


class RunEvents(list[Event]):
    """One run's events, in order, from `Writer.open_buffer`: the run's listener for the store
    is this list's `append` (a C call: no Python frame per event)."""

    __slots__ = ("writer", "opened_ms")

    def __init__(self, writer: "Writer", opened_ms: int) -> None:
        super().__init__()
        self.writer = writer
        self.opened_ms = opened_ms  # when the run began (a run in flight past HOLD_BACK_MS is taken as it goes)


class _Barrier:
    """Made by flush(): set by the writer once the first `count` events queued are written."""

    __slots__ = ("count", "done", "unreachable")

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = threading.Event()
        self.unreachable: BaseException | None = None  # set: the database could not be reached


class Writer:
    """Takes events (one by one, or runs whole), spills them, and writes them on a thread of its own."""

    listener: Callable[[Event], None]
    """Takes events one by one (see `_make_listener`); a record sink: the runs it hears encode their data."""

    def __init__(self, database: Database, failures: Failures, notices: "LocalNotices | None") -> None:
        """`notices`: where the EVENTS_CHANNEL notice of each commit goes in this process (None:
        the database sends it to every process itself)."""
        self._database = database
        self._where = database.where
        self._rows = RowMaker(database, failures)
        self._failures = failures
        self._notices = notices
        self._hold_back_ms = database.HOLD_BACK_MS
        self._queue: list[Event] = []  # events that came one by one (`listener`)
        self._live: dict[int, RunEvents] = {}  # the event lists of runs in flight (open_buffer), by id
        self._ended: list[RunEvents] = []  # runs handed over whole at their end (take_run), not yet spilled
        self._lock = threading.Lock()  # taking from the queue (a spill) vs flush()'s count; never per event
        self._taken = 0  # events taken from the queue so far (under _lock)
        self._written = 0  # of those, how many are committed, or failed and reported (writer thread)
        # spilled, not yet written, in order: (rows, how many events, the spill's number, the spill's last part?)
        self._spilled: deque[tuple[Batch, int, int, bool]] = deque()
        self._spills = 0  # spills begun (under _lock): their numbers
        self._committed = 0  # every spill up to this number is committed (or failed and reported): writer thread
        self._sides_upto = 0  # every side write queued before this spill began is written: writer thread
        self._waiters = CommitWaiters()  # answers waiting for a spill to be committed (`committed`)
        self._wake_from: asyncio.AbstractEventLoop | None = None  # the loop that will wake the writer for its answers
        self._barriers: list[_Barrier] = []
        self._wake = threading.Lock()  # released to wake the writer (flush, close)
        self._wake.acquire()
        self._stop = False
        self._closed = False
        self._writing = True  # False once the thread is gone: a late event is let go
        self._unreachable: BaseException | None = None  # set while the database cannot be reached
        # Small writes beside the events (who started a run, approvals), written before the next events
        self._side: deque[Statement] = deque()  # appended by any thread, taken by the writer's (atomic ends)
        self.listener = record_sink(self._make_listener())
        self._thread = threading.Thread(target=self._write_loop, name="skillyard-store", daemon=True)
        self._thread.start()

    # ─── taking events ───────────────────────────────────────────────────────────────

    def _make_listener(self) -> Callable[[Event], None]:
        """An append, and every SPILL_EVENTS events a spill (about 0.3 ms; never waits: if the
        writer is spilling at that moment, a later event spills)."""
        queue = self._queue
        append = queue.append
        spill = self._spill

        def listener(event: Event) -> None:
            append(event)
            if len(queue) >= SPILL_EVENTS:
                spill(blocking=False)

        return listener

    def open_buffer(self) -> RunEvents:
        """A list for one run's events: the Run's listener is its `append`, and `take_run`
        hands it back at the run's end. The writer takes the run whole then (SQLite keeps it
        as one value, packing.py); a run still going after `HOLD_BACK_MS` is taken as it goes."""
        events = RunEvents(self, time.time_ns() // 1_000_000)
        self._live[id(events)] = events
        return events

    def for_run(self, run: "Run") -> Callable[[Event], None]:
        """The listener of one run's events: the `append` of a list of the run's own
        (`open_buffer`), handed over at the run's end (`take_run`); an event after the end
        comes by `listener`."""
        events = self.open_buffer()

        def ended(run: "Run") -> None:
            run.redirect(events.append, self.listener)
            self.take_run(events)

        run.on_end(ended)
        return events.append

    def take_run(self, events: RunEvents) -> None:
        """The run of `events` (from open_buffer) has ended: the writer takes it whole (an event
        of it arriving later must come by `listener`). Every SPILL_RUNS runs, a spill."""
        self._live.pop(id(events), None)
        if not events:  # a run that emitted nothing (or whose events were all taken as it went)
            return
        self._ended.append(events)
        if len(self._ended) >= SPILL_RUNS:
            self._spill(blocking=False)

    def receives(self, listener: Callable[[Event], None]) -> bool:
        """Whether `listener` delivers to this writer: its `listener`, or a run's buffer's `append`."""
        owner = getattr(listener, "__self__", None)
        return listener is self.listener or (isinstance(owner, RunEvents) and owner.writer is self)

    def add_side(self, statement: Statement) -> None:
        """A small write beside the events, written by the writer thread before the next events."""
        self._side.append(statement)

    def wake(self) -> None:
        """Wake the writer thread now rather than at its next tick."""
        if self._wake.locked():  # (checked first: every waiting answer calls this, most while it is awake already)
            try:
                self._wake.release()
            except RuntimeError:  # woken meanwhile
                pass

    def committed(self) -> "asyncio.Future[None] | None":
        """A future done once every run that ended before this call (and every event queued) is
        committed, or reported lost (call on an event loop): the first spill that begins after now
        takes them. Wakes the writer at the end of this turn of the loop (once for every answer
        of the turn): it commits at once, with whatever else is queued. None when
        there is nothing to wait for: the store is closed, or its database is out of reach (the
        events are kept in memory meanwhile; waiting would hold the answer until it is back)."""
        if self._closed or self._unreachable is not None:
            return None
        future = self._waiters.add(self._spills + 1)
        loop = future.get_loop()
        if self._wake_from is not loop:  # the first answer of this turn of the loop: wake the writer at its end
            self._wake_from = loop
            loop.call_soon(self._woken_by_answers)
        return future

    def _woken_by_answers(self) -> None:
        """Wake the writer for the answers that asked for a commit in the loop's last turn:
        once for them all, after them, so they share a spill (and a commit)."""
        self._wake_from = None
        self.wake()

    @property
    def queue_depth(self) -> int:
        """Events recorded and not yet committed (or reported lost). Read without the lock: a
        gauge may be a few events off while the writer takes a batch."""
        return max(0, self._taken + self._waiting() - self._written)

    def _waiting(self) -> int:
        """Events recorded and not yet taken by a spill (queued, in runs ended or in flight)."""
        return len(self._queue) + sum(map(len, self._ended[:])) + sum(map(len, list(self._live.values())))

    # ─── flush, close ────────────────────────────────────────────────────────────────

    @property
    def closed(self) -> bool:
        return self._closed

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued so far is committed; StoreError if writing failed."""
        if not self._closed:
            with self._lock:
                barrier = _Barrier(self._taken + self._waiting())
                self._barriers.append(barrier)
            self.wake()
            if not barrier.done.wait(timeout):
                raise StoreError(f"the run store {self._where} did not finish writing within {timeout:g}s")
            if barrier.unreachable is not None:
                raise StoreError(
                    f"the run store {self._where} cannot be reached: {barrier.unreachable} — the events are kept "
                    "(in this process's memory) and written when it is back"
                )
        failed = self._failures.take()
        if failed is not None:
            raise StoreError(f"writing to the run store {self._where} failed; some events were not recorded: {failed}")

    def close(self) -> bool:
        """Write what is queued and stop the thread; a write failure is logged. False: it was
        closed already."""
        if self._closed:
            return False
        try:
            self.flush()
        except StoreError as exc:
            logger.error("run store: some events were not recorded", error=str(exc))
        self._closed = True
        self._stop = True
        self.wake()
        self._thread.join(timeout=10)
        self._writing = False
        self._waiters.release(None)
        return True

    def cpu(self) -> float | None:
        """CPU seconds the writer thread has used so far (None where the system cannot tell)."""
        ident = self._thread.ident
        if ident is None or not self._thread.is_alive() or not hasattr(time, "pthread_getcpuclockid"):
            return None
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(ident))
        except OSError:
            return None

    # ─── the thread ──────────────────────────────────────────────────────────────────

    def _write_loop(self) -> None:
        """Every FLUSH_INTERVAL_S (at once for flush() and close()): spill, then commit.

        While the database cannot be reached, the wait between attempts doubles up to
        RETRY_MAX_S (a flush() still tries at once). Stopping while it is down gives up on
        what is kept (counted as `unavailable`)."""
        backoff = FLUSH_INTERVAL_S
        while True:
            self._wake.acquire(timeout=backoff if self._unreachable is not None else FLUSH_INTERVAL_S)
            stop = self._stop
            self._database.housekeeping()
            self._spill()
            self._commit()
            backoff = min(backoff * 2, RETRY_MAX_S) if self._unreachable is not None else FLUSH_INTERVAL_S
            if stop and self._unreachable is not None and self._spilled:
                self._drop_kept(sum(item[1] for item in self._spilled), "the store was closed while its database was out of reach")
            if stop and not self._queue and not self._ended and not self._spilled:
                return

    def _take_side(self) -> tuple[list[Statement], int]:
        """The side writes queued so far (each added before the events it goes with were
        spilled), and the spill number up to which they are all there."""
        upto = self._spills  # read first: what was queued before this spill began is taken below
        queued = self._side
        return [queued.popleft() for _ in range(len(queued))], upto  # (swapping the deque could lose an append)

    def _write_side(self) -> None:
        """The side writes queued so far, alone (no events wait: an approval)."""
        side, upto = self._take_side()
        if side:
            try:
                self._side_alone(side)
            except StoreUnavailable:
                self._side.extendleft(reversed(side))  # kept, in order, for the next round (the events wait too)
                return
        self._sides_upto = upto

    def _side_alone(self, side: list[Statement]) -> None:
        """Write `side` in a transaction of its own; a failure is reported, but StoreUnavailable."""
        try:
            self._database.write_side(side)
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - reported by flush()/close(); the engine keeps running
            self._failures.fail(exc)

    def _spill(self, *, blocking: bool = True) -> int:
        """Take what waits (events queued by the listener, runs ended, the events of runs in
        flight past `HOLD_BACK_MS`; everything while a flush() waits or the store closes)
        and turn it into ready rows (ready.py), in parts of about STATEMENT_EVENTS events.

        Runs on the listener's thread, on the thread that ends a run and on the writer's;
        holding the lock keeps the spilled rows in order.
        """
        if not self._lock.acquire(blocking):
            return 0
        try:
            self._spills += 1  # before anything is taken: a run ended before a waiter asked is in this spill or an earlier one
            number = self._spills
            queue = self._queue
            events = queue[:]  # taken before the runs ended: a late event of a run never precedes the run
            del queue[: len(events)]  # the listener only appends: what arrives meanwhile stays queued
            ended = self._ended
            runs = ended[:]
            del ended[: len(runs)]
            events += self._take_live(everything=bool(self._barriers or self._stop))
            count = len(events) + sum(map(len, runs))
            if not count or not self._writing:  # closed: nobody writes them any more, let them go
                return 0
            self._taken += count
            try:
                parts = [(self._rows.ready(part_events, part_runs), len(part_events) + sum(map(len, part_runs)))
                         for part_runs, part_events in _parts(runs, events)]
            except Exception as exc:  # noqa: BLE001 - reported by flush()/close(); the engine keeps running
                self._failures.fail(exc)
                self._failures.count("write", count, f"{type(exc).__name__}: {exc}")
                parts = [(Batch(), count)]  # nothing to write, but counted, in order
            last = len(parts) - 1
            self._spilled.extend((rows, size, number, at == last) for at, (rows, size) in enumerate(parts))
            return count
        finally:
            self._lock.release()

    def _take_live(self, *, everything: bool) -> list[Event]:
        """The events so far of the runs in flight for longer than `HOLD_BACK_MS` (`everything`: all)."""
        cutoff = time.time_ns() // 1_000_000 - self._hold_back_ms
        taken: list[Event] = []
        for events in list(self._live.values()):  # the runs' thread adds and removes runs meanwhile
            if events and (everything or events.opened_ms <= cutoff):
                part = events[:]
                del events[: len(part)]  # the run only appends: what arrives meanwhile waits
                taken += part
        return taken

    def _commit(self) -> None:
        """Write the spilled rows, in order, up to STATEMENT_EVENTS events per transaction (the
        write lock is held for one, so other processes wait little)."""
        spilled = self._spilled
        while spilled:  # (under load the event loop spills meanwhile: this goes on, batch after batch)
            # who started each of the batch's runs goes first, in the batch's transaction (one commit, not two)
            side, upto = self._take_side()
            count = 0
            taken = []
            while spilled and (not count or count + spilled[0][1] <= STATEMENT_EVENTS):
                taken.append(spilled.popleft())
                count += taken[-1][1]
            rows = taken[0][0] if len(taken) == 1 else Batch.joined([item[0] for item in taken])
            if rows.count or rows.packs or side:
                try:
                    self._write(rows, count, side)
                except StoreUnavailable as exc:  # kept, in order, for the next attempt
                    self._side.extendleft(reversed(side))
                    spilled.extendleft(reversed(taken))
                    self._out_of_reach(exc)
                    return
            self._sides_upto = upto
            if self._unreachable is not None:
                logger.info("run store: the database is back", store=self._where)
                self._unreachable = None
            self._written += count
            _, _, number, last = taken[-1]
            self._committed = number if last else number - 1
            self._release_barriers()  # a flush() waits for its own events only
            self._release_waiters()
        self._write_side()  # also when no events wait (an approval alone)
        self._release_barriers()  # also a flush() with nothing (left) to write
        with self._lock:  # no spill is under way: every one begun so far is written (also those that took nothing)
            if not spilled:
                self._committed = self._spills
        self._release_waiters()

    def _write(self, rows: Batch, count: int, side: list[Statement]) -> None:
        """One batch (of `count` events) to the database, after the side writes `side` in the
        same transaction; what fails is counted, not raised, but StoreUnavailable (the caller
        keeps the batch and the side writes)."""
        try:
            try:
                lost = self._database.write_rows(rows, side)
            except (UnicodeEncodeError, orjson.JSONEncodeError):  # a lone surrogate in an id (the data's were repaired)
                lost = self._database.write_rows(self._rows.scrubbed(rows), side)
        except StoreUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - reported by flush()/close(); the engine keeps running
            if side:  # the side writes or the rows: each in a transaction of its own, so one cannot cost the other
                self._side_alone(side)
                side.clear()  # written: the caller keeps none of them if the rows' write finds the database gone
                self._write(rows, count, side)
                return
            self._failures.fail(exc)
            self._failures.count("write", count, f"{type(exc).__name__}: {exc}")
            return
        for what, error in lost:  # events a dialect wrote one by one and could not
            self._failures.fail(error)
            self._failures.count("write", 1, what)
        if self._notices is not None and self._notices.listening(EVENTS_CHANNEL):
            self._notice_events(rows)

    def _out_of_reach(self, exc: BaseException) -> None:
        """The database cannot be reached: tell waiting flush() calls now, keep at most
        MAX_PENDING_EVENTS events (the oldest beyond go, counted)."""
        if self._unreachable is None:
            logger.error("run store: the database cannot be reached; events are kept and written when it is back",
                         store=self._where, error=str(exc))
        self._unreachable = exc
        self._waiters.release(None)  # answers are not held while it is down (the events are kept)
        with self._lock:
            waiting, self._barriers = self._barriers, []
        for barrier in waiting:
            barrier.unreachable = exc
            barrier.done.set()
        kept = sum(item[1] for item in self._spilled)
        if kept > MAX_PENDING_EVENTS:
            self._drop_kept(kept - MAX_PENDING_EVENTS, f"more than {MAX_PENDING_EVENTS} events waited for the database")

    def _drop_kept(self, at_least: int, why: str) -> None:
        """Let the oldest kept batches go (at least `at_least` events), counted as `unavailable`."""
        dropped = 0
        while self._spilled and dropped < at_least:
            dropped += self._spilled.popleft()[1]
        self._written += dropped
        self._failures.count("unavailable", dropped, why)
        self._failures.fail(StoreError(f"{dropped} events were not recorded: {why}"))

    def _notice_events(self, rows: Batch) -> None:
        """In-process EVENTS_CHANNEL notices ("<run_id> <last seq>" per run), for a dialect
        whose database does not send them itself; only when someone listens."""
        values = rows.events
        last = dict(zip(values[0::EVENT_WIDTH], values[1::EVENT_WIDTH], strict=True))  # a run's events come in seq order: its last wins
        if rows.packs:
            last.update(zip(rows.packs[0::3], rows.packs[1::3], strict=True))
        assert self._notices is not None
        self._notices.deliver(EVENTS_CHANNEL, list(map("{} {}".format, last.keys(), last.values())))  # C calls only

    def _release_waiters(self) -> None:
        """An answer goes once its run's events are committed and who started it is written."""
        if self._waiters:
            self._waiters.release(min(self._committed, self._sides_upto))

    def _release_barriers(self) -> None:
        if self._barriers:
            with self._lock:
                ready = [b for b in self._barriers if b.count <= self._written]
                self._barriers = [b for b in self._barriers if b.count > self._written]
            for barrier in ready:
                barrier.done.set()


def _parts(runs: Sequence[list[Event]], events: list[Event]) -> Iterator[tuple[Sequence[list[Event]], list[Event]]]:
    """(runs, events) in parts of about STATEMENT_EVENTS events each (a run is not cut), the
    runs first: a late event of a run comes after the run."""
    if len(events) + sum(map(len, runs)) <= STATEMENT_EVENTS:
        yield runs, events
        return
    part: list[list[Event]] = []
    size = 0
    for run in runs:
        if part and size + len(run) > STATEMENT_EVENTS:
            yield part, []
            part, size = [], 0
        part.append(run)
        size += len(run)
    if part:
        yield part, []
    for start in range(0, len(events), STATEMENT_EVENTS):
        yield [], events[start : start + STATEMENT_EVENTS]
