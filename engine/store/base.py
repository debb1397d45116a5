"""What every run store shares, whatever its database: the listener, the writer thread, reads.

The Engine gives each run a list of its own (`for_run`, `open_buffer`): the Run's listener for the
store is that list's `append`, a C call, and at the run's end the list is handed back whole
(`take_run`). Events fed one by one (`Store.listener`: a store used by hand, a Temporal
worker, an event after its run's end) are appended to a queue.

Every SPILL_RUNS runs ended (or SPILL_EVENTS queued events) the store "spills" them: the
events become ready rows (rows.py: plain column values, the data's JSON text being the
record the Run encoded once — C calls only —, and the few rows that events imply, computed
in Python; a backend that packs runs makes a whole run one text, packing.py), and the event
objects can die. Holding them longer would make the garbage collector run (they are
allocations that are not freed) and promote them to its oldest generation, whose growth sets
off full collections: pauses of tens or hundreds of ms on the event loop. A writer thread
wakes every FLUSH_INTERVAL_S, spills what is left (and the events so far of runs in flight
for longer than the backend's `_HOLD_BACK_MS`), and hands the rows to the database: one
transaction per batch, nothing for the database to parse. A run's events are stored in `seq`
order even when it fails or is cancelled.

One bad event never costs other runs theirs: when a batch cannot be encoded as a whole (a lone
surrogate, nesting deeper than JSON readers take), its rows are encoded one by one and only
the bad row changes (surrogates replaced, or its data replaced by a note saying why). Such
repairs and lost writes are counted by kind (`write_failures`) and logged once per kind.

A database that cannot be reached for a while (a server restarting: `StoreUnavailable` from a
backend) loses nothing: the writer keeps the batches, in order, and tries again with backoff;
flush() says so at once (StoreError). Past MAX_PENDING_EVENTS kept events, the oldest are
dropped and counted (`unavailable`).

The backends (sqlite.py, postgres.py) give the connection: `_write_rows`, `_write_side`,
`_fetch`, `_transaction`, `_close_connection`, and notifications.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import operator
import os
import socket
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from itertools import chain, compress, repeat
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import orjson

from ..errors import SkillyardError
from ..logging import logger
from ..runtime.events import RUN_ENDING_EVENTS, Event, record_sink
from ..safety.redaction import Redactor, RunScrubber, unparsed_arguments
from ..safety.untrusted import find_problem, scrub_surrogates
from .batches import BatchRecords
from .rows import EVENT_WIDTH, IMPLYING_TYPES, PACKED, Batch, Implier, json_text
from .schema import EVENTS_CHANNEL, TOOL_SETTINGS_CHANNEL
from .tool_settings import DELETE_SETTING, SELECT_SETTINGS, UPSERT_SETTING, ToolSetting, setting_params, setting_from_row

if TYPE_CHECKING:
    from ..runtime.run import Run

FLUSH_INTERVAL_S = 0.05  # the writer wakes this often: what was queued by then is committed
SPILL_EVENTS = 256  # the listener spills the queue at this length (~550 objects: no collection is set off)
SPILL_RUNS = 16  # runs handed over whole (take_run) that set off a spill: about as many events
STATEMENT_EVENTS = 2_000  # events per INSERT (one transaction): the write lock is held for one of them
STORED_DEPTH = 200  # data nested deeper is not stored (orjson writes 255 levels, SQLite's JSON reads 1,000)
MAX_PENDING_EVENTS = 100_000  # kept while the database cannot be reached; older ones are dropped and counted
RETRY_MAX_S = 2.0  # the longest wait between two attempts to reach a database that is down
HOST = socket.gethostname()
# Leases: each process writing to a store says it is alive this often (its writer thread);
# a process silent for PROCESS_TIMEOUT_MS is gone, and its unfinished runs are interrupted.
HEARTBEAT_S = 2.0
PROCESS_TIMEOUT_MS = 8_000
PROCESS_FORGOTTEN_MS = 3_600_000  # rows of processes gone this long are deleted
COUNT_MATCHES = 1_000  # an ambiguous run id prefix's matches are counted up to this many
_RUN_SELECT = (  # a run and who started it (run_owners: only runs started by a service's caller have one)
    "SELECT r.id, r.kind, r.name, r.status, r.started_at, r.finished_at, r.input, r.output, r.error, r.usage, "
    "r.parent_run_id, o.principal FROM runs AS r LEFT JOIN run_owners AS o ON o.run_id = r.id"
)


class StoreError(SkillyardError):
    """The store cannot be opened or used; the message says why and what to do."""


class AmbiguousRunId(StoreError):
    """A run id prefix that matches several runs. Its text names a few of them, for the local
    user of the store (`skillyard runs show`); `count` alone is for the service's callers."""

    def __init__(self, prefix: str, shown: list[str], count: int):
        self.prefix, self.count = prefix, count
        self.counted = f"{count:,}" + (" or more" if count >= COUNT_MATCHES else "")
        listed = ", ".join(shown) + (", …" if count > len(shown) else "")
        super().__init__(f"run id prefix {prefix!r} matches several runs ({self.counted}: {listed}); give more of the id")


class StoreUnavailable(SkillyardError):
    """Raised by a backend's `_write_rows` when its database cannot be reached: the batch is kept."""


@dataclass(frozen=True)
class RunRecord:
    id: str
    kind: str
    name: str
    status: str
    started_at: int
    finished_at: int | None
    input: Any
    output: Any
    error: Any
    usage: Any
    parent_run_id: str | None
    principal: str | None = None  # the API key name that started it through the service

    @property
    def duration_ms(self) -> int | None:
        return None if self.finished_at is None else self.finished_at - self.started_at

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "duration_ms": self.duration_ms}


class RunEvents(list):  # type: ignore[type-arg]
    """One run's events, in order, from `Store.open_buffer`: the run's listener for the store
    is this list's `append` (a C call: no Python frame per event)."""

    __slots__ = ("store", "opened_ms")

    def __init__(self, store: "Store", opened_ms: int) -> None:
        super().__init__()
        self.store = store
        self.opened_ms = opened_ms  # when the run began (a run in flight past _HOLD_BACK_MS is taken as it goes)


class _Barrier:
    """Made by flush(): set by the writer once the first `count` events queued are written."""

    __slots__ = ("count", "done", "unreachable")

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = threading.Event()
        self.unreachable: BaseException | None = None  # set: the database could not be reached


def select_events(table: str) -> str:
    """The query of a run's event rows after a seq, in `seq` order, from `table`."""
    return (f"SELECT type, run_id, seq, ts, tool_call_id, step_id, skill, data FROM {table} "
            "WHERE run_id = ? AND seq > ? ORDER BY seq")


SELECT_EVENTS = select_events("events")


def stored_events(rows: Sequence[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Event rows as read by `select_events`, as `Event.to_dict()` gives them (data parsed)."""
    return [event_dict(kind, run_id, seq, ts, call, step, skill, json.loads(data))
            for kind, run_id, seq, ts, call, step, skill, data in rows]


def event_dict(kind: str, run_id: str, seq: int, ts: int, call: str | None, step: str | None, skill: str | None,
               data: Any) -> dict[str, Any]:
    """A stored event as `Event.to_dict()` gives it (no key for a call, step or skill it has not)."""
    event: dict[str, Any] = {"type": kind, "run_id": run_id, "seq": seq, "ts": ts}
    if call is not None:
        event["tool_call_id"] = call
    if step is not None:
        event["step_id"] = step
    if skill is not None:
        event["skill"] = skill
    event["data"] = data
    return event


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


_IMPLIES = IMPLYING_TYPES.__contains__
# An event's parts as C calls (the spill makes rows without a Python frame per event), by
# position in the Event tuple: type 0, run_id 1, seq 2, ts 3, tool_call_id 4, step_id 5, skill 6, data_json 9
_META = operator.itemgetter(1, 2, 0, 3, 4, 5, 6)
_ROW = operator.itemgetter(1, 2, 0, 3, 4, 5, 6, 9)  # the row with the data's JSON as the Run encoded it (bytes)
_TYPE = operator.itemgetter(0)
_DATA_JSON = operator.itemgetter(9)
_DECODE = bytes.decode


_NOT_RECORDED = "not_recorded"  # the key of the note that replaces data the store cannot write


def _repaired_row(row: tuple[Any, ...]) -> tuple[tuple[Any, ...], str | None]:
    """A row that encodes, and the kind of repair it needed (None: none).

    `lone_surrogate`: its lone surrogates became U+FFFD (the event is kept, text marked);
    `unencodable`: its data became `{"not_recorded": why}` (too deep, or anything else).
    """
    if _encodes(row):
        return row, None
    problem = find_problem(row, STORED_DEPTH, numbers=False)
    if problem is not None and "surrogate" in problem.message:
        fixed = tuple(scrub_surrogates(row)[0])
        if _encodes(fixed):
            return fixed, "lone_surrogate"
        problem = find_problem(fixed, STORED_DEPTH, numbers=False) or problem
    why = str(problem) if problem is not None else "it cannot be written as JSON"
    safe = tuple(scrub_surrogates(part)[0] if isinstance(part, str) else part for part in row[:7])
    return (*safe, {_NOT_RECORDED: f"this event's data could not be stored: {why}"}), "unencodable"


def _encodes(row: tuple[Any, ...]) -> bool:
    """orjson writes it (so it is at most 255 levels deep: SQLite reads 1,000), or it is no
    deeper than STORED_DEPTH and the standard library writes it (integers beyond 64 bits)."""
    try:
        orjson.dumps(row, default=str, option=orjson.OPT_NON_STR_KEYS)
        return True
    except Exception:  # noqa: BLE001 - look closer
        pass
    if find_problem(row, STORED_DEPTH, numbers=False) is not None:
        return False
    try:
        json_text(row).encode()  # a lone surrogate is no UTF-8
        return True
    except Exception:  # noqa: BLE001 - the caller replaces the data
        return False


_OPEN_STORES: "weakref.WeakSet[Store]" = weakref.WeakSet()


@atexit.register
def _close_open_stores() -> None:
    """A process that never called close() still writes what it queued before it exits."""
    for store in list(_OPEN_STORES):
        with contextlib.suppress(Exception):
            store.close()




class Store(BatchRecords):
    """A run store: the engine's listener, a writer thread, the query API, tool settings and
    notifications. `RunStore` (SQLite) and `PostgresStore` are its backends."""

    listener: Callable[[Event], None]
    """Takes events one by one (see `_make_listener`): a store used by hand, a Temporal worker,
    an event after its run's end. An Engine's runs come whole instead (`open_buffer`)."""
    where: str
    """The store as users name it in messages (a file, or a URL without its password)."""
    # Dialect pieces of the shared queries (SQLite's; PostgreSQL overrides them)
    _NEWEST = "r.started_at DESC, r.rowid DESC"
    _PREFIX = "r.id >= ? AND r.id < ?"

    def _start_writer(self, redactor: Redactor | None, redacted_events: bool) -> None:
        """The writer's state and thread; a backend calls this once its database is open.

        `redacted_events=True`: the events arrive already redacted by this same redactor
        (an Engine's own runs), so the writer does not walk them a second time."""
        self.redactor = redactor or Redactor()
        self.redacted_events = redacted_events
        self._queue: list[Event] = []  # events that came one by one (`listener`)
        self._live: dict[int, RunEvents] = {}  # the event lists of runs in flight (open_buffer), by id
        self._ended: list[RunEvents] = []  # runs handed over whole at their end (take_run), not yet spilled
        self._lock = threading.Lock()  # taking from the queue (a spill) vs flush()'s count; never per event
        self._taken = 0  # events taken from the queue so far (under _lock)
        self._written = 0  # of those, how many are committed, or failed and reported (writer thread)
        # Spilled, not yet written, in order: (event rows, the rows they imply, how many events)
        self._spilled: deque[tuple[Batch, int]] = deque()
        self._implier = Implier(os.getpid(), HOST)
        self._barriers: list[_Barrier] = []
        self._wake = threading.Lock()  # released to wake the writer (flush, close)
        self._wake.acquire()
        self._stop = False
        self._closed = False
        self._writing = True  # False once the writer is gone: a late event is let go
        self._unreachable: BaseException | None = None  # set while the database cannot be reached
        self._scrubbers: dict[str, RunScrubber] = {}  # run_id → its redaction state, until the run ends
        self._run_tools: dict[str, str | None] = {}  # run_id → the call that owns it (to know when it ends)
        self._failed: BaseException | None = None
        self._failures: dict[str, int] = {}  # kind → how many events (see write_failures)
        self._failures_lock = threading.Lock()  # counted by the listener's thread (spill) and the writer
        # Small writes beside the events (who started a run, approvals), written before the next events
        self._side: list[tuple[str, tuple[Any, ...]]] = []
        self._listeners: dict[str, list[Callable[[str], None]]] = {}  # in-process notifications (see listen)
        self._deliveries: SimpleQueue[tuple[str, list[str]] | None] | None = None  # payloads by channel
        self.origin = f"{HOST}:{os.getpid()}:{id(self):x}"  # who made a change, in notification payloads
        self.listener = self._make_listener()
        self._writer = threading.Thread(target=self._write_loop, name="skillyard-store", daemon=True)
        self._writer.start()
        _OPEN_STORES.add(self)

    # ─── writing ──────────────────────────────────────────────────────────────────────

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

        # redacted events arrive with their data encoded (the Run encodes it once for every sink)
        return record_sink(listener) if self.redacted_events else listener

    def open_buffer(self) -> RunEvents:
        """A list for one run's events: the Run's listener is its `append`, and `take_run`
        hands it back at the run's end. The writer takes the run whole then (SQLite keeps it
        as one value, packing.py); a run still going after `_HOLD_BACK_MS` is taken as it goes."""
        events = RunEvents(self, time.time_ns() // 1_000_000)
        self._live[id(events)] = events
        return events

    def for_run(self, run: "Run") -> Callable[[Event], None]:
        """The listener of one run's events (Engine.subscribe's `for_run`): the `append` of a
        list of the run's own (`open_buffer`), handed over at the run's end (`take_run`); an
        event after the end comes by `listener`."""
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
        """Whether `listener` delivers to this store: its `listener`, or a run's buffer's `append`."""
        owner = getattr(listener, "__self__", None)
        return listener is self.listener or (isinstance(owner, RunEvents) and owner.store is self)

    @property
    def queue_depth(self) -> int:
        """Events recorded and not yet committed (or reported lost) by the writer.

        Read without the lock: a gauge may be a few events off while the writer takes a batch."""
        return max(0, self._taken + self._waiting() - self._written)

    def _waiting(self) -> int:
        """Events recorded and not yet taken by a spill (queued, in runs ended or in flight)."""
        return len(self._queue) + sum(map(len, self._ended[:])) + sum(map(len, list(self._live.values())))

    @property
    def write_failures(self) -> dict[str, int]:
        """How many events this store could not write as they were, by kind (a copy; empty: none).

        `lone_surrogate`: stored with lone surrogates replaced by U+FFFD; `unencodable`: stored
        with its data replaced by a `not_recorded` note; `write`: lost (the transaction failed);
        `unavailable`: lost because the database stayed out of reach past MAX_PENDING_EVENTS
        kept events (or until close()).
        """
        with self._failures_lock:
            return dict(self._failures)

    def _count_failure(self, kind: str, events: int, detail: str) -> None:
        """Count; log the first of each kind only (a flood of bad rows is one log line)."""
        with self._failures_lock:
            first = kind not in self._failures
            self._failures[kind] = self._failures.get(kind, 0) + events
        if first:
            logger.error("run store: events not written as they were", kind=kind, store=self.where, detail=detail,
                         hint="write_failures counts them; later ones of this kind are not logged")

    def record_owner(self, run_id: str, principal: str) -> None:
        """Remember who started `run_id` (written by the writer thread, before the run's events)."""
        self._side.append(("INSERT INTO run_owners (run_id, principal) VALUES (?, ?) ON CONFLICT DO NOTHING",
                           (run_id, principal)))

    def set_approval(self, run_id: str, tool_call_id: str, status: str) -> None:
        """Record that a call waits for an answer (`pending`) or no longer does (`closed`), so that
        any process sharing the store can tell (written by the writer thread, like the events)."""
        self._side.append((
            "INSERT INTO approvals (run_id, tool_call_id, status, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (run_id, tool_call_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at",
            (run_id, tool_call_id, status, int(time.time() * 1000)),
        ))
        self._poke()  # a pending approval is news for other replicas: do not wait for the next tick

    def pending_approvals(self, run_id: str) -> list[str]:
        """The tool calls of `run_id` waiting for an answer, as recorded by `set_approval`."""
        rows = self._fetch("SELECT tool_call_id FROM approvals WHERE run_id = ? AND status = 'pending' ORDER BY tool_call_id",
                           (run_id,))
        return [row[0] for row in rows]

    def _poke(self) -> None:
        with contextlib.suppress(RuntimeError):  # already awake
            self._wake.release()

    def writer_cpu(self) -> float | None:
        """CPU seconds the writer thread has used so far (None where the system cannot tell):
        the part of the store's cost that is not the event loop's (bench.store reports both)."""
        ident = self._writer.ident
        if ident is None or not self._writer.is_alive() or not hasattr(time, "pthread_getcpuclockid"):
            return None
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(ident))
        except OSError:
            return None

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued so far is committed; StoreError if writing failed."""
        if not self._closed:
            with self._lock:
                barrier = _Barrier(self._taken + self._waiting())
                self._barriers.append(barrier)
            self._poke()
            if not barrier.done.wait(timeout):
                raise StoreError(f"the run store {self.where} did not finish writing within {timeout:g}s")
            if barrier.unreachable is not None:
                raise StoreError(
                    f"the run store {self.where} cannot be reached: {barrier.unreachable} — the events are kept "
                    "(in this process's memory) and written when it is back"
                )
        failed, self._failed = self._failed, None  # reported once; later batches may well succeed
        if failed is not None:
            raise StoreError(f"writing to the run store {self.where} failed; some events were not recorded: {failed}")

    def close(self) -> None:
        """Write what is queued, stop the writer, close the file. Idempotent; never raises.

        A write failure is logged (call flush() first to get it as a StoreError).
        """
        if self._closed:
            return
        try:
            self.flush()
        except StoreError as exc:
            logger.error("run store: some events were not recorded", error=str(exc))
        self._closed = True
        self._stop = True
        self._poke()
        self._writer.join(timeout=10)
        self._writing = False
        self._close_notifications()
        self._close_connection()
        _OPEN_STORES.discard(self)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_loop(self) -> None:
        """Every FLUSH_INTERVAL_S (at once for flush() and close()): spill, then commit.

        While the database cannot be reached, the wait between attempts doubles up to
        RETRY_MAX_S (a flush() still tries at once). Stopping while it is down gives up on
        what is kept (counted as `unavailable`)."""
        backoff = FLUSH_INTERVAL_S
        while True:
            self._wake.acquire(timeout=backoff if self._unreachable is not None else FLUSH_INTERVAL_S)
            stop = self._stop
            self._write_side()
            self._housekeeping()
            self._spill()
            self._commit()
            backoff = min(backoff * 2, RETRY_MAX_S) if self._unreachable is not None else FLUSH_INTERVAL_S
            if stop and self._unreachable is not None and self._spilled:
                self._drop_kept(sum(item[1] for item in self._spilled), "the store was closed while its database was out of reach")
            if stop and not self._queue and not self._ended and not self._spilled:
                return

    def _spill(self, *, blocking: bool = True) -> int:
        """Take what waits (events queued by the listener, runs ended, the events of runs in
        flight past `_HOLD_BACK_MS`; everything while a flush() waits or the store closes)
        and turn it into ready rows (see `_ready`), in parts of about STATEMENT_EVENTS events.

        Runs on the listener's thread, on the thread that ends a run and on the writer's;
        holding the lock keeps the spilled rows in order.
        """
        if not self._lock.acquire(blocking):
            return 0
        try:
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
                for part_runs, part_events in _parts(runs, events):
                    self._spilled.append((self._ready(part_events, part_runs), len(part_events) + sum(map(len, part_runs))))
            except Exception as exc:  # noqa: BLE001 - reported by flush()/close(); the engine keeps running
                self._failed = exc
                self._count_failure("write", count, f"{type(exc).__name__}: {exc}")
                self._spilled.append((Batch(), count))  # nothing to write, but counted, in order
            return count
        finally:
            self._lock.release()

    # How long a run in flight waits to be taken whole at its end; past it, its events are
    # taken as they come. 0: at every spill (a shared store whose replicas follow runs as they go).
    _HOLD_BACK_MS = 0

    def _take_live(self, *, everything: bool) -> list[Event]:
        """The events so far of the runs in flight for longer than `_HOLD_BACK_MS` (`everything`: all)."""
        cutoff = time.time_ns() // 1_000_000 - self._HOLD_BACK_MS
        taken: list[Event] = []
        for events in list(self._live.values()):  # the runs' thread adds and removes runs meanwhile
            if events and (everything or events.opened_ms <= cutoff):
                part = events[:]
                del events[: len(part)]  # the run only appends: what arrives meanwhile waits
                taken += part
        return taken

    def _pack_run(self, events: list[Event]) -> str | None:
        """A whole run's events as one text for its row; None: written as rows. A backend whose
        run rows hold their events (SQLite, packing.py) packs; this one does not."""
        return None

    def _ready(self, batch: list[Event], runs: Sequence[list[Event]] = ()) -> Batch:
        """The events (`batch`, and the runs handed over whole) as rows of plain values (data
        as JSON text), and the rows they imply; a run the backend packs is one text (`packs`).

        Events redacted by their Run bring their data encoded (`data_json`): the rows are
        then made by C calls only, no Python per event (this may run on the event loop's thread),
        the data kept as those bytes where the backend's writer
        makes them text (`_DATA_BYTES`: no str built on this thread); Python looks only at the few
        events that imply rows.
        Otherwise (a store fed by hand, data no fast encoder writes) each event is redacted
        if need be, encoded, and repaired if it cannot be (`_repaired_row`).
        """
        out = Batch()
        if runs:
            unpacked = self._pack_runs(runs, out) if self.redacted_events else list(chain.from_iterable(runs))
            if unpacked:  # before the events that came one by one: a late event of a run is among those
                batch = unpacked + batch
        if not self.redacted_events:
            return self._ready_one_by_one(batch, out)
        if self._DATA_BYTES:  # the writer's thread makes the bytes text (no Python object per event here)
            out.events = tuple(chain.from_iterable(map(_ROW, batch)))
            if None in out.events[EVENT_WIDTH - 1 :: EVENT_WIDTH]:  # an event without data_json: row by row
                return self._ready_one_by_one(batch, out)
        else:
            try:
                texts = list(map(_DECODE, map(_DATA_JSON, batch)))
            except TypeError:  # an event without data_json (None): row by row
                return self._ready_one_by_one(batch, out)
            out.events = tuple(chain.from_iterable(map(operator.add, map(_META, batch), zip(texts))))
        out.count = len(batch)
        implying = list(map(_IMPLIES, map(_TYPE, batch)))
        self._imply(compress(batch, implying), compress(range(len(batch)), implying), out)
        out.implied = tuple(out.implied)
        return out

    def _pack_runs(self, runs: Sequence[list[Event]], out: Batch) -> list[Event]:
        """Put the runs the backend packs into `out.packs` (with the rows they imply); the
        events of the others, in order."""
        rest: list[Event] = []
        packs: list[Any] = []
        whole_tool_run = self._implier.whole_tool_run
        for events in runs:
            if not events:  # taken as it went, all of it (a writer's spill meanwhile)
                continue
            text = self._pack_run(events)
            if text is None:
                rest += events
                continue
            packs += (events[0][1], events[-1][2], text)
            implying = list(compress(events, map(_IMPLIES, map(_TYPE, events))))
            if not whole_tool_run(implying, PACKED, out):
                self._imply(implying, repeat(PACKED), out)
        out.packs = tuple(packs)
        return rest

    def _imply(self, implying: Iterable[Event], indexes: Iterable[int], out: Batch) -> None:
        """The rows implied by the events `implying` (their indexes in `out.events`: `indexes`)."""
        imply = self._implier.imply
        for event, index in zip(implying, indexes):
            imply(index, (event[1], event[2], event[0], event[3], event[4], event[5], event[6]), event[7], out)

    def _ready_one_by_one(self, batch: list[Event], out: Batch) -> Batch:
        values = out.events = []
        imply = self._implier.imply
        for index, event in enumerate(batch):
            if event.data_json is not None and self.redacted_events:
                row = event[1], event[2], event[0], event[3], event[4], event[5], event[6], event.data
                text = event.data_json.decode()
            else:
                row = self._repaired(event) if self.redacted_events else self._redacted_row(event)
                text = json_text(row[7])
            values += (*row[:7], text)
            if _IMPLIES(row[2]):
                imply(index, row[:7], row[7], out)
        out.count = len(batch)
        return out.seal()

    def _commit(self) -> None:
        """Write the spilled rows, in order, up to STATEMENT_EVENTS events per transaction (the
        write lock is held for one, so other processes wait little)."""
        spilled = self._spilled
        while spilled:
            count = 0
            taken = []
            while spilled and (not count or count + spilled[0][1] <= STATEMENT_EVENTS):
                taken.append(spilled.popleft())
                count += taken[-1][1]
            rows = taken[0][0] if len(taken) == 1 else Batch.joined([part for part, _ in taken])
            if rows.count or rows.packs:
                try:
                    try:
                        self._write_rows(rows)
                    except (UnicodeEncodeError, orjson.JSONEncodeError):  # a lone surrogate in an id (the data's were repaired)
                        self._write_rows(self._scrubbed(rows))
                except StoreUnavailable as exc:  # kept, in order, for the next attempt
                    spilled.extendleft(reversed(taken))
                    self._out_of_reach(exc)
                    return
                except Exception as exc:  # noqa: BLE001 - reported by flush()/close(); the engine keeps running
                    self._failed = exc
                    self._count_failure("write", count, f"{type(exc).__name__}: {exc}")
                else:
                    if self._listeners.get(EVENTS_CHANNEL) and not self.notices_cross_processes:
                        self._notice_events(rows)
            if self._unreachable is not None:
                logger.info("run store: the database is back", store=self.where)
                self._unreachable = None
            self._written += count
            self._release_barriers()  # a flush() waits for its own events only
        self._release_barriers()  # also a flush() with nothing (left) to write

    def _scrubbed(self, rows: Batch) -> Batch:
        """`rows` with lone surrogates replaced by U+FFFD in every value (counted per event:
        `lone_surrogate`); implied rows are scrubbed alike."""
        fixed = Batch()
        for index in range(rows.count):
            row, changed = scrub_surrogates(tuple(rows.events[index * EVENT_WIDTH : (index + 1) * EVENT_WIDTH]))
            if changed:
                self._count_failure("lone_surrogate", 1, f"event {row[2]} #{row[1]} of run {row[0]}")
            fixed.add_event(row)
        fixed.implied = scrub_surrogates(rows.implied)[0]
        fixed.packs = rows.packs  # orjson wrote them: valid text
        return fixed.seal()

    def _out_of_reach(self, exc: BaseException) -> None:
        """The database cannot be reached: tell waiting flush() calls now, keep at most
        MAX_PENDING_EVENTS events (the oldest beyond go, counted)."""
        if self._unreachable is None:
            logger.error("run store: the database cannot be reached; events are kept and written when it is back",
                         store=self.where, error=str(exc))
        self._unreachable = exc
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
        self._count_failure("unavailable", dropped, why)
        self._failed = StoreError(f"{dropped} events were not recorded: {why}")

    def _notice_events(self, rows: Batch) -> None:
        """In-process EVENTS_CHANNEL notices ("<run_id> <last seq>" per run), for a backend
        whose database does not send them itself; only when someone listens."""
        values = rows.events
        last = dict(zip(values[0::EVENT_WIDTH], values[1::EVENT_WIDTH]))  # a run's events come in seq order: its last wins
        if rows.packs:
            last.update(zip(rows.packs[0::3], rows.packs[1::3]))
        if self._deliveries is not None:  # one item for the batch (C calls: no Python per run here)
            self._deliveries.put((EVENTS_CHANNEL, list(map("{} {}".format, last.keys(), last.values()))))

    def _release_barriers(self) -> None:
        if self._barriers:
            with self._lock:
                ready = [b for b in self._barriers if b.count <= self._written]
                self._barriers = [b for b in self._barriers if b.count > self._written]
            for barrier in ready:
                barrier.done.set()

    def _repaired(self, event: Event) -> tuple[Any, ...]:
        """The event as a row that encodes (data still a value), repaired if need be (see
        `_repaired_row`), the repair counted."""
        fixed, kind = _repaired_row((event.run_id, event.seq, event.type, event.ts, event.tool_call_id, event.step_id,
                                     event.skill, event.data))
        if kind is not None:
            self._count_failure(kind, 1, f"event {fixed[2]} #{fixed[1]} of run {fixed[0]}")
            if kind == "unencodable":  # its data is gone: whoever flushes hears of it
                self._failed = StoreError(f"an event of run {fixed[0]} could not be stored: {fixed[7][_NOT_RECORDED]}")
        return fixed

    def _redacted_row(self, event: Event) -> tuple[Any, ...]:
        """The row of an event that the engine did not redact (a store fed by hand), repaired
        if need be; a run's redaction state is forgotten when the run ends."""
        try:
            data = self._redact(event)
        except Exception as exc:  # noqa: BLE001 - e.g. data nested past the recursion limit: this event only
            data = {_NOT_RECORDED: f"this event's data could not be redacted: {type(exc).__name__}"}
            self._count_failure("unencodable", 1, f"event {event.type} #{event.seq} of run {event.run_id}")
            self._failed = StoreError(f"an event of run {event.run_id} could not be stored: {data[_NOT_RECORDED]}")
        kind = event.type
        if kind == "tool_call_start" and event.seq == 1:
            self._run_tools[event.run_id] = event.tool_call_id
        elif kind in RUN_ENDING_EVENTS and (kind == "agent_done" or self._run_tools.get(event.run_id, "") == event.tool_call_id):
            self._run_tools.pop(event.run_id, None)  # the run is over: forget its redaction state
            self._scrubbers.pop(event.run_id, None)
        return self._repaired(event._replace(data=data))

    def _redact(self, event: Event) -> dict[str, Any]:
        data = event.data
        if event.type == "tool_call_start":
            arguments = data.get("arguments")
            if isinstance(arguments, (str, bytes)):  # a model's raw JSON text: redact what it says, or show none
                try:
                    data = {**data, "arguments": json.loads(arguments)}
                except ValueError:
                    data = {**data, "arguments": unparsed_arguments(arguments)}
        scrub = self._scrubbers.get(event.run_id)
        if scrub is None:
            scrub = self._scrubbers[event.run_id] = self.redactor.for_run()
        return scrub(data)  # type: ignore[no-any-return]

    # ─── the backend's part ───────────────────────────────────────────────────────────
    # Queries use `?` placeholders; a backend translates them if it needs to.

    # Whether other processes sharing this store hear its notices (PostgreSQL's NOTIFY, sent by
    # the database itself for EVENTS_CHANNEL). False: the writer delivers them in this process only.
    notices_cross_processes = False
    _EVENT_ROWS = "events"  # the table of event rows (SQLite: `event_rows`, and runs' packed events)
    # True: an event row's data may stay the bytes the Run encoded (UTF-8 JSON), and the
    # backend's writer makes them text; False: the rows hold text only
    _DATA_BYTES = False

    def _write_rows(self, rows: Batch) -> None:
        """One transaction: the event rows, then the rows they imply (rows.py), in the
        statements' order IMPLIED_ORDER.
        Raises StoreUnavailable when the database cannot be reached (the batch is kept)."""
        raise NotImplementedError

    def _write_side(self) -> None:
        """Run and clear the statements of `self._side` in one transaction (kept for the next
        round when the database cannot be reached)."""
        raise NotImplementedError

    def _housekeeping(self) -> None:
        """Work of the writer's tick beside writing (a shared store: heartbeats, interrupting
        the runs of processes that died). None for a store of one host."""

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query (StoreError when the database cannot be read)."""
        raise NotImplementedError

    def _transaction(self, statements: list[tuple[str, Sequence[Any]]]) -> list[int]:
        """Run the statements in one transaction; their row counts (StoreError on failure)."""
        raise NotImplementedError

    def _close_connection(self) -> None:
        raise NotImplementedError

    # ─── reading ──────────────────────────────────────────────────────────────────────

    def runs(self, *, tool: str | None = None, status: str | None = None, since_ms: int | None = None, limit: int = 20,
             principal: str | None = None, batch: str | None = None) -> list[RunRecord]:
        """Recent runs, newest first. `since_ms` is an absolute time in ms since the epoch;
        `principal`: only the runs started by that API key name; `batch`: only that batch's cases."""
        where, params = _where({"r.name = ?": tool, "r.status = ?": status, "r.started_at >= ?": since_ms,
                                "o.principal = ?": principal,
                                "r.id IN (SELECT run_id FROM batch_cases WHERE batch_id = ?)": batch})
        rows = self._fetch(f"{_RUN_SELECT} WHERE {where} ORDER BY {self._NEWEST} LIMIT ?", (*params, limit))
        return [_run(row) for row in rows]

    def run(self, run_id: str, *, principal: str | None = None) -> RunRecord | None:
        """One run by id, or by a prefix of its id that matches one run only. `principal`:
        among the runs started by that API key name only (a caller's view: another's run,
        by id or prefix, is not there); None: among every run.

        None if nothing matches; AmbiguousRunId if the prefix matches several runs.
        """
        if not run_id:
            return None
        owner = "" if principal is None else " AND o.principal = ?"
        mine: tuple[str, ...] = () if principal is None else (principal,)
        rows = self._fetch(f"{_RUN_SELECT} WHERE r.id = ?{owner}", (run_id, *mine))
        if not rows:  # a prefix: a range on the primary key (no LIKE: `_` is a wildcard there)
            where, params = f"{self._PREFIX}{owner}", (run_id, run_id + "\U0010ffff", *mine)
            rows = self._fetch(f"{_RUN_SELECT} WHERE {where} ORDER BY r.id LIMIT 6", params)
            if len(rows) > 1:
                counted = f"SELECT COUNT(*) FROM ({_RUN_SELECT} WHERE {where} LIMIT {COUNT_MATCHES}) AS matches"
                raise AmbiguousRunId(run_id, [r[0] for r in rows[:5]], self._fetch(counted, params)[0][0])
        return _run(rows[0]) if rows else None

    def events(self, run_id: str, *, after_seq: int = 0) -> list[dict[str, Any]]:
        """A run's events in `seq` order, as `Event.to_dict()` gives them (redacted)."""
        return stored_events(self._fetch(SELECT_EVENTS, (run_id, after_seq)))

    def model_exchanges(self, run_id: str) -> list[dict[str, Any]]:
        """The prompts and answers of a run's model calls, in order (what replay answers from)."""
        rows = self._fetch(
            "SELECT seq, tool_call_id, step_id, skill, model, attempt, messages, response FROM model_exchanges WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        return [
            {"seq": seq, "tool_call_id": call, "step_id": step, "skill": skill, "model": model, "attempt": attempt,
             "messages": json.loads(messages), "response": response}
            for seq, call, step, skill, model, attempt, messages, response in rows
        ]

    def tool_logs(self, *, tool: str | None = None, status: str | None = None, run_id: str | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Tool execution logs, newest first (status success | error | timeout)."""
        where, params = _where({"tool = ?": tool, "status = ?": status, "run_id = ?": run_id})
        rows = self._fetch(
            f"SELECT id, run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at "
            f"FROM tool_logs WHERE {where} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        keys = ("id", "run_id", "tool_call_id", "tool", "input", "output", "status", "error_message", "duration_ms", "created_at")
        return [dict(zip(keys, row)) for row in rows]

    def prune(self, older_than_ms: int) -> int:
        """Delete runs (and their events, logs and exchanges) that started before now − older_than_ms.

        Runs still `running` are kept. Returns how many runs were deleted.
        """
        cutoff = int(time.time() * 1000) - older_than_ms
        old = "SELECT id FROM runs WHERE started_at < ? AND status != 'running'"
        statements: list[tuple[str, Sequence[Any]]] = [
            (f"DELETE FROM {table} WHERE run_id IN ({old})", (cutoff,))
            for table in (self._EVENT_ROWS, "model_exchanges", "tool_logs", "run_owners", "approvals", "batch_cases")
        ]
        return self._transaction([*statements, (f"DELETE FROM runs WHERE id IN ({old})", (cutoff,))])[-1]

    # ─── tool settings (layered over the YAML: link/overlay.py) ───────────────────────────────

    def tool_settings(self) -> dict[str, ToolSetting]:
        """Every stored tool setting, by tool name."""
        return {row[0]: setting_from_row(row) for row in self._fetch(SELECT_SETTINGS)}

    def write_tool_setting(self, setting: ToolSetting) -> None:
        """Create or replace the stored setting of `setting.name`; other processes hear of it."""
        self._transaction([(UPSERT_SETTING, setting_params(setting)), *self._settings_notice(setting.name)])

    def delete_tool_setting(self, name: str) -> bool:
        """Remove the stored setting of `name`; False if there was none."""
        return self._transaction([(DELETE_SETTING, (name,)), *self._settings_notice(name)])[0] > 0

    def _settings_notice(self, name: str) -> list[tuple[str, Sequence[Any]]]:
        """Statements that tell other processes of a settings change, in its transaction (none here)."""
        return []

    def on_tool_settings_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` (on a store thread) when another process changes tool settings;
        returns a function that stops it. A change made through this store does not call it."""
        origin = self.origin

        def heard(payload: str) -> None:
            if payload.split(" ", 1)[0] != origin:
                callback()

        return self.listen(TOOL_SETTINGS_CHANNEL, heard)

    # ─── notifications ────────────────────────────────────────────────────────────────

    def notify(self, channel: str, payload: str) -> None:
        """Send `payload` to the listeners of `channel` (this backend: in this process only)."""
        self._deliver(channel, payload)

    def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call `callback(payload)` for each notice on `channel`, from a store thread (never the
        caller's); returns a function that stops listening. The listener is active on return."""
        with self._lock:
            self._listeners.setdefault(channel, []).append(callback)
            if self._deliveries is None:
                self._deliveries = SimpleQueue()
                threading.Thread(target=self._delivery_loop, args=(self._deliveries,), name="skillyard-store-notices",
                                 daemon=True).start()

        def stop() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._listeners.get(channel, []).remove(callback)

        return stop

    def _deliver(self, channel: str, payload: str) -> None:
        if self._listeners.get(channel) and self._deliveries is not None:
            self._deliveries.put((channel, [payload]))

    def _delivery_loop(self, deliveries: "SimpleQueue[tuple[str, list[str]] | None]") -> None:
        while (item := deliveries.get()) is not None:
            channel, payloads = item
            for payload in payloads:
                for callback in list(self._listeners.get(channel, ())):
                    try:
                        callback(payload)
                    except Exception as exc:  # noqa: BLE001 - a listener's bug must not stop the others
                        logger.error("run store: a notification listener failed", channel=channel,
                                     error=f"{type(exc).__name__}: {exc}")

    def _close_notifications(self) -> None:
        if self._deliveries is not None:
            self._deliveries.put(None)


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


def _where(conditions: dict[str, Any]) -> tuple[str, list[Any]]:
    """`{"name = ?": value}` → an SQL condition and its parameters; empty values (None, "") are skipped."""
    used = [(clause, value) for clause, value in conditions.items() if value is not None and value != ""]
    return " AND ".join(clause for clause, _ in used) or "1=1", [value for _, value in used]


def _run(row: Iterable[Any]) -> RunRecord:
    rid, kind, name, status, started, finished, input, output, error, usage, parent, principal = row
    return RunRecord(rid, kind, name, status, started, finished, _loads(input), _loads(output), _loads(error), _loads(usage),
                     parent, principal)


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists here. A killed process not yet reaped by its
    parent (a zombie) still does: see RunStore._mark_interrupted for the heartbeat that tells."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
