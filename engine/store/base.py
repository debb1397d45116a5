"""`Store`: one run store, the face its callers see, made of parts that each do one job.

    Store (this file: the public methods, each handed to the part that owns it)
    ├── writer      writer.py    taking events, spilling them into ready rows (ready.py), the
    │                            writer thread, flush barriers, side writes, the lease's tick
    ├── failures    failures.py  what could not be written as it was, by kind; the failure flush() reports
    ├── reads       queries.py   runs, events, tool logs, model exchanges, approvals; prune
    ├── batch_records batches.py batches and their cases
    ├── sessions    sessions.py  named conversations, their messages, who holds a turn
    ├── settings    tool_settings.py  tool settings, and hearing of another process's changes
    ├── notices     notices.py (this process) or postgres_notices.py (LISTEN/NOTIFY)
    └── database    database.py: the one interface of the dialects, sqlite.py and postgres.py

`RunStore` (sqlite.py) and `PostgresStore` (postgres.py) are Stores over their dialect's
Database. Redaction happens once: events an Engine's runs emit are redacted by their Run and
go to the writer as they are (`for_run`); `listener` is the writer's too when the store is
opened with `redacted_events=True` (an Engine's store, a Temporal worker's), otherwise the
entry that redacts what is fed by hand (redacting.py).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from ..safety.redaction import Redactor
from .batches import Batches, CaseRow
from .database import HOST, Database
from .failures import Failures
from .notices import LocalNotices, Notices
from .queries import Queries, RunRecord
from .redacting import RedactingListener
from .sessions import Sessions
from .tool_settings import SettingsWatch, ToolSetting, ToolSettings
from .writer import RunEvents, Writer

if TYPE_CHECKING:
    import asyncio

    from ..runtime.events import Event
    from ..runtime.run import Run

_OPEN_STORES: "set[Store]" = set()  # until closed: a store dropped unclosed still writes its queue at exit


@atexit.register
def _close_open_stores() -> None:
    """A process that never called close() still writes what it queued before it exits."""
    for store in list(_OPEN_STORES):
        with contextlib.suppress(Exception):
            store.close()


class Store:
    """A run store: the engine's listener, a writer thread, the query API, batches, tool
    settings and notices, over one database. `RunStore` (SQLite) and `PostgresStore` are its dialects."""

    listener: Callable[["Event"], None]
    """Takes events one by one: a store used by hand, a Temporal worker, an event after its run's
    end (an Engine's runs come whole instead, `for_run`). Redacts them unless the store was
    opened with `redacted_events=True`."""
    for_run: Callable[["Run"], Callable[["Event"], None]]
    """The listener of one run's events (Engine.subscribe's `for_run`): the `append` of a list of
    the run's own, handed to the writer whole at the run's end (the writer's own method: no
    call of the facade's per run)."""
    committed: Callable[[], "asyncio.Future[None] | None"]
    """A future done once every run that ended before the call is committed (call on an event
    loop; None: nothing to wait for, the store is closed or its database out of reach). What a
    front door awaits before it answers (`store.durability: committed`); calls that end together
    share one commit (the writer's own method, commits.py)."""
    where: str
    """The store as users name it in messages (a file, or a URL without its password)."""

    def __init__(self, database: Database, notices: Notices, *, redactor: Redactor | None = None,
                 redacted_events: bool = False, settings_watch: SettingsWatch | None = None) -> None:
        """A dialect's Store calls this once its database is open. `redacted_events=True`: the
        events fed to `listener` arrive redacted already (an Engine's, a Temporal worker's)."""
        self.database = database
        self.where = database.where
        self.schema_version = database.schema_version
        self.interrupted = database.interrupted
        self.redactor = redactor or Redactor()
        self.origin = f"{HOST}:{os.getpid()}:{id(self):x}"  # who made a change, in notice payloads
        self.failures = Failures(self.where)
        self.notices = notices
        local = notices if isinstance(notices, LocalNotices) and not database.notices_cross_processes else None
        self.writer = Writer(database, self.failures, local)
        self.reads = Queries(database)
        self.batch_records = Batches(database)
        self.sessions = Sessions(database)  # named conversations (sessions.py)
        self.settings = ToolSettings(database, notices, self.origin, settings_watch)
        self.listener = (self.writer.listener if redacted_events
                         else RedactingListener(self.redactor, self.writer.listener, self.failures))
        self.for_run = self.writer.for_run
        self.committed = self.writer.committed
        _OPEN_STORES.add(self)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ─── writing (writer.py) ─────────────────────────────────────────────────────────

    def open_buffer(self) -> RunEvents:
        """A list for one run's events, handed back by `take_run` (see Writer.open_buffer)."""
        return self.writer.open_buffer()

    def take_run(self, events: RunEvents) -> None:
        self.writer.take_run(events)

    def receives(self, listener: Callable[["Event"], None]) -> bool:
        """Whether `listener` delivers to this store: its `listener`, or a run's buffer's `append`."""
        return listener is self.listener or self.writer.receives(listener)

    def record_owner(self, run_id: str, principal: str) -> None:
        """Remember who started `run_id` (written by the writer thread, before the run's events)."""
        self.writer.add_side(("INSERT INTO run_owners (run_id, principal) VALUES (?, ?) ON CONFLICT DO NOTHING",
                              (run_id, principal)))

    def set_approval(self, run_id: str, tool_call_id: str, status: str) -> None:
        """Record that a call waits for an answer (`pending`) or no longer does (`closed`), so that
        any process sharing the store can tell (written by the writer thread, like the events)."""
        self.writer.add_side((
            "INSERT INTO approvals (run_id, tool_call_id, status, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (run_id, tool_call_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at",
            (run_id, tool_call_id, status, int(time.time() * 1000)),
        ))
        self.writer.wake()  # a pending approval is news for other replicas: do not wait for the next tick

    @property
    def queue_depth(self) -> int:
        """Events recorded and not yet committed (or reported lost) by the writer."""
        return self.writer.queue_depth

    @property
    def write_failures(self) -> dict[str, int]:
        """How many events this store could not write as they were, by kind (a copy; empty: none).

        `lone_surrogate`: stored with lone surrogates replaced by U+FFFD; `unencodable`: stored
        with its data replaced by a `not_recorded` note; `write`: lost (the transaction failed);
        `unavailable`: lost because the database stayed out of reach past MAX_PENDING_EVENTS
        kept events (or until close()).
        """
        return self.failures.counts()

    def writer_cpu(self) -> float | None:
        """CPU seconds the writer thread has used so far (None where the system cannot tell):
        the part of the store's cost that is not the event loop's (bench.store reports both)."""
        return self.writer.cpu()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued so far is committed; StoreError if writing failed."""
        self.writer.flush(timeout)

    def close(self) -> None:
        """Write what is queued, stop the writer, close the database. Idempotent; never raises.

        A write failure is logged (call flush() first to get it as a StoreError).
        """
        if not self.writer.close():
            return
        self.notices.close()
        self.settings.close()
        self.database.close()
        _OPEN_STORES.discard(self)

    # ─── reading (queries.py, batches.py) ────────────────────────────────────────────

    def runs(self, *, tool: str | None = None, status: str | None = None, since_ms: int | None = None, limit: int = 20,
             principal: str | None = None, batch: str | None = None) -> list[RunRecord]:
        """Recent runs, newest first (see Queries.runs)."""
        return self.reads.runs(tool=tool, status=status, since_ms=since_ms, limit=limit, principal=principal, batch=batch)

    def run(self, run_id: str, *, principal: str | None = None) -> RunRecord | None:
        """One run by id or unambiguous prefix (see Queries.run); AmbiguousRunId if several match."""
        return self.reads.run(run_id, principal=principal)

    def events(self, run_id: str, *, after_seq: int = 0) -> list[dict[str, Any]]:
        """A run's events in `seq` order, as `Event.to_dict()` gives them (redacted)."""
        return self.reads.events(run_id, after_seq=after_seq)

    def model_exchanges(self, run_id: str) -> list[dict[str, Any]]:
        """The prompts and answers of a run's model calls, in order (what replay answers from)."""
        return self.reads.model_exchanges(run_id)

    def tool_logs(self, *, tool: str | None = None, status: str | None = None, run_id: str | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Tool execution logs, newest first (status success | error | timeout)."""
        return self.reads.tool_logs(tool=tool, status=status, run_id=run_id, limit=limit)

    def pending_approvals(self, run_id: str) -> list[str]:
        """The tool calls of `run_id` waiting for an answer, as recorded by `set_approval`."""
        return self.reads.pending_approvals(run_id)

    def prune(self, older_than_ms: int) -> int:
        """Delete runs that started before now − older_than_ms, with their rows; `running` ones
        are kept. Returns how many runs were deleted."""
        return self.reads.prune(older_than_ms)

    def start_batch(self, batch_id: str, tool: str, total: int, *, principal: str | None = None,
                    data_file: str | None = None) -> None:
        """Record a batch as running (again, when it resumes)."""
        self.batch_records.start_batch(batch_id, tool, total, principal=principal, data_file=data_file)

    def record_batch_cases(self, batch_id: str, cases: list[CaseRow]) -> None:
        """Finished cases, in one transaction. The verdicts arrive redacted (they may quote the output)."""
        self.batch_records.record_batch_cases(batch_id, cases)

    def finish_batch(self, batch_id: str, status: str) -> None:
        """`done` or `interrupted`."""
        self.batch_records.finish_batch(batch_id, status)

    def batches(self, *, limit: int = 20, principal: str | None = None) -> list[dict[str, Any]]:
        """Recent batches, newest first, with their counts; `principal`: only that key name's."""
        return self.batch_records.batches(limit=limit, principal=principal)

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        """One batch with its cases in case id order, or None."""
        return self.batch_records.batch(batch_id)

    def batch_run_ids(self, batch_id: str) -> list[str]:
        return self.batch_records.batch_run_ids(batch_id)

    # ─── tool settings (tool_settings.py; layered over the YAML: link/overlay.py) ─────

    def tool_settings(self) -> dict[str, ToolSetting]:
        """Every stored tool setting, by tool name."""
        return self.settings.all()

    def write_tool_setting(self, setting: ToolSetting) -> None:
        """Create or replace the stored setting of `setting.name`; other processes hear of it."""
        self.settings.write(setting)

    def delete_tool_setting(self, name: str) -> bool:
        """Remove the stored setting of `name`; False if there was none."""
        return self.settings.delete(name)

    def on_tool_settings_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` (on a store thread) when another process changes tool settings;
        returns a function that stops it. A change made through this store does not call it."""
        return self.settings.on_changed(callback)

    # ─── notices (notices.py, postgres_notices.py) ────────────────────────────────────

    @property
    def notices_cross_processes(self) -> bool:
        """Whether other processes sharing this store hear its notices (PostgreSQL's NOTIFY).
        False: notices reach this process only."""
        return self.database.notices_cross_processes

    def notify(self, channel: str, payload: str) -> None:
        """Send `payload` to the listeners of `channel`."""
        self.notices.notify(channel, payload)

    def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call `callback(payload)` for each notice on `channel`, from a store thread (never the
        caller's); returns a function that stops listening. The listener is active on return."""
        return self.notices.listen(channel, callback)
