"""The one interface of the store's dialects: `Database` (SQLite: sqlite.py, PostgreSQL: postgres.py).

A Store (base.py) is made of parts (the writer, the queries, batches, tool settings, notices);
each reaches its database through this interface and nothing else:

- the writer thread: `write_rows` (a batch of ready rows and the small writes beside the
  events, one transaction), `write_side` (those small writes alone), `housekeeping` (the lease heartbeat, every tick);
- everyone else: `fetch` (one query), `transaction` (statements, one transaction), `events`
  (a run's events as `Event.to_dict()` gives them);
- where the dialects differ: the class attributes below, `pack_run`, `settings_notice`.

Queries use `?` placeholders; a dialect translates them if it needs to. Also here: the leases
every dialect keeps (a process writing to a store says it is alive every HEARTBEAT_S; one
silent for PROCESS_TIMEOUT_MS is gone, and its unfinished runs are interrupted).
"""

from __future__ import annotations

import json
import os
import socket
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from ..runtime.events import Event
    from .rows import Batch

HOST = socket.gethostname()
HEARTBEAT_S = 2.0
PROCESS_TIMEOUT_MS = 8_000
PROCESS_FORGOTTEN_MS = 3_600_000  # rows of processes gone this long are deleted
RETRY_MAX_S = 2.0  # the longest wait between two attempts to reach a database that is down (writer, listener)

Statement = tuple[str, Sequence[Any]]


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


def is_alive(pid: int) -> bool:
    """Whether a process with this pid exists here. A killed process not yet reaped by its
    parent (a zombie) still does: the heartbeat tells (sqlite.py's `_mark_interrupted`)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Database:
    """A store's database, as its parts use it. A dialect subclasses it and fills in the
    methods that raise NotImplementedError; the rest is what SQLite and PostgreSQL share."""

    where: str
    """The store as users name it in messages (a file, or a URL without its password)."""
    schema_version: int
    interrupted: int
    """How many runs opening the store marked `interrupted` (their process was gone)."""

    # Pieces of the shared queries (SQLite's; PostgreSQL overrides them)
    NEWEST = "r.started_at DESC, r.rowid DESC"  # ORDER BY of runs, newest first
    PREFIX = "r.id >= ? AND r.id < ?"  # a range of run ids (a prefix)
    EVENT_ROWS = "events"  # the table of event rows (SQLite: `event_rows`, and runs' packed events)
    # True: an event row's data may stay the bytes the Run encoded (UTF-8 JSON), and the
    # dialect's writer makes them text; False: the rows hold text only
    DATA_BYTES = False
    # How long a run in flight waits to be taken whole at its end; past it, its events are
    # taken as they come. 0: at every spill (a shared store whose replicas follow runs as they go).
    HOLD_BACK_MS = 0
    # Whether other processes sharing this store hear its notices (PostgreSQL's NOTIFY, sent by
    # the database itself for EVENTS_CHANNEL). False: the writer delivers them in this process only.
    notices_cross_processes = False

    @property
    def run_tables(self) -> tuple[str, ...]:
        """The tables of a run's rows beside `runs` (keyed by run_id): prune deletes them with it."""
        return (self.EVENT_ROWS, "model_exchanges", "tool_logs", "run_owners", "approvals", "batch_cases", "run_executors")

    # ─── the writer thread ───────────────────────────────────────────────────────────

    def write_rows(self, rows: "Batch", side: Sequence[Statement] = ()) -> list[tuple[str, BaseException]]:
        """One transaction: the side writes `side` (as `write_side` runs them), the event rows,
        then the rows they imply (rows.py), in the statements' order IMPLIED_ORDER. Returns the events it had to leave out, each as
        (what it was, why): none, unless the dialect writes a refused batch one by one.
        Raises StoreUnavailable when the database cannot be reached (the batch is kept)."""
        raise NotImplementedError

    def write_side(self, statements: list[Statement]) -> None:
        """Run the statements in one transaction. StoreUnavailable: they are kept for the next
        round (the database is out of reach, or locked); anything else is a failure to report."""
        raise NotImplementedError

    def housekeeping(self) -> None:
        """Work of the writer's tick beside writing (the lease: heartbeats, interrupting the
        runs of processes that died)."""

    def pack_run(self, events: "list[Event]") -> str | None:
        """A whole run's events as one text for its row; None: written as rows. A dialect whose
        run rows hold their events (SQLite, packing.py) packs; this one does not."""
        return None

    # ─── everyone else ───────────────────────────────────────────────────────────────

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query (StoreError when the database cannot be read)."""
        raise NotImplementedError

    def transaction(self, statements: list[Statement]) -> list[int]:
        """Run the statements in one transaction; their row counts (StoreError on failure)."""
        raise NotImplementedError

    def events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        """A run's events after `after_seq`, in `seq` order, as `Event.to_dict()` gives them."""
        return stored_events(self.fetch(SELECT_EVENTS, (run_id, after_seq)))

    def settings_notice(self, origin: str, name: str) -> list[Statement]:
        """Statements that tell other processes of a tool-settings change, in its transaction
        (none here: a dialect without push polls, sqlite.py's SettingsPoll)."""
        return []

    def close(self) -> None:
        raise NotImplementedError
