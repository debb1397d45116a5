"""The embedded run store: SQLite in WAL mode, written off the hot path.

`RunStore.listener` is an event listener that only appends the event to a queue (well under
a microsecond). A writer thread turns events into rows in batches, one transaction per
batch, in arrival order, so a run's events are stored in `seq` order even when it fails or
is cancelled. Many processes may share one database file (WAL + busy timeout). A run that was
`running` when its process died is marked `interrupted` the next time the store opens.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import sqlite3
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from ..errors import SkillyardError
from ..events import Event
from ..logging import logger
from ..redaction import Redactor, RunScrubber
from .schema import MIGRATIONS, SchemaTooNew, migrate

TOOL_LOG_OUTPUT_CHARS = 10_000
FLUSH_INTERVAL_S = 0.05
BUSY_TIMEOUT_MS = 10_000
WRITE_ATTEMPTS = 4  # a batch that fails with a transient error (database locked…) is retried, in order
_HOST = socket.gethostname()
_RUN_COLUMNS = "id, kind, name, status, started_at, finished_at, input, output, error, usage, parent_run_id"


class StoreError(SkillyardError):
    """The store cannot be opened or used; the message says why and what to do."""


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

    @property
    def duration_ms(self) -> int | None:
        return None if self.finished_at is None else self.finished_at - self.started_at

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "duration_ms": self.duration_ms}


class _Barrier:
    """Queued by flush(): set by the writer once everything queued before it is committed."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# Event types that add or change rows besides their own event row.
_IMPLY_ROWS = frozenset({"agent_start", "agent_done", "tool_call_start", "tool_call_result", "tool_call_error", "model_exchange"})


def _dumps(value: Any) -> str:
    try:  # orjson: the same compact JSON several times faster, so the writer holds the GIL less
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):  # e.g. integers beyond 64 bits
        return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        connection.close()
        raise
    return connection


_OPEN_STORES: "weakref.WeakSet[RunStore]" = weakref.WeakSet()


@atexit.register
def _close_open_stores() -> None:
    """A process that never called close() still writes what it queued before it exits."""
    for store in list(_OPEN_STORES):
        with contextlib.suppress(Exception):
            store.close()


class RunStore:
    def __init__(self, path: str | Path, *, redactor: Redactor | None = None, redacted_events: bool = False):
        """`redacted_events=True`: the events arrive already redacted by this same redactor
        (an Engine's own runs), so the writer does not walk them a second time."""
        self.path = Path(path)
        self.redactor = redactor or Redactor()
        self.redacted_events = redacted_events
        self._write: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write = connect(self.path)
            self.schema_version = migrate(self._write)
            self.interrupted = self._mark_interrupted()
        except SchemaTooNew as exc:
            self._close_connection()
            raise StoreError(
                f"the run store {self.path} was written by a newer skillyard (schema version {exc.version}; this one "
                f"knows up to {len(MIGRATIONS)}): upgrade skillyard, point store.path in config/engine.yaml at "
                "another file, or run with --no-store"
            ) from None
        except (sqlite3.Error, OSError) as exc:
            self._close_connection()
            raise StoreError(
                f"cannot open the run store {self.path}: {exc} — check that the directory is writable and the file "
                "is a skillyard store (move it away to start a new one), or run with --no-store"
            ) from None
        self._queue: deque[Event | _Barrier] = deque()
        self._wake = threading.Event()
        self._stop = False
        self._closed = False
        self._pending_calls: dict[tuple[str, str], dict[str, Any]] = {}  # (run, call) → input, start
        self._run_tools: dict[str, str] = {}  # run_id → tool_call_id that owns the run (tool runs)
        self._scrubbers: dict[str, RunScrubber] = {}  # run_id → its redaction state, until the run ends
        self._ended: list[str] = []  # runs whose last event is in the batch being written
        self._failed: BaseException | None = None
        self._writer = threading.Thread(target=self._write_loop, name="skillyard-store", daemon=True)
        self._writer.start()
        _OPEN_STORES.add(self)

    # ─── writing ──────────────────────────────────────────────────────────────────────

    def listener(self, event: Event) -> None:
        """The engine calls this for every event: O(1), never blocks the event loop."""
        self._queue.append(event)
        if event.type in ("tool_call_result", "tool_call_error", "agent_done"):
            self._wake.set()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued so far is committed; StoreError if writing failed."""
        if not self._closed:
            barrier = _Barrier()
            self._queue.append(barrier)
            self._wake.set()
            if not barrier.done.wait(timeout):
                raise StoreError(f"the run store {self.path} did not finish writing within {timeout:g}s")
        failed, self._failed = self._failed, None  # reported once; later batches may well succeed
        if failed is not None:
            raise StoreError(f"writing to the run store {self.path} failed; some events were not recorded: {failed}")

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
        self._wake.set()
        self._writer.join(timeout=10)
        self._close_connection()
        _OPEN_STORES.discard(self)

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _close_connection(self) -> None:
        if self._write is not None:
            with contextlib.suppress(sqlite3.Error):
                self._write.close()
            self._write = None

    def _write_loop(self) -> None:
        while True:
            self._wake.wait(FLUSH_INTERVAL_S)
            self._wake.clear()
            batch: list[Event | _Barrier] = []
            queue = self._queue
            while queue:
                batch.append(queue.popleft())
            events = [item for item in batch if type(item) is not _Barrier]
            if events:
                try:
                    self._write_with_retries(events)
                except Exception as exc:  # noqa: BLE001 - reported by flush()/close(); the engine keeps running
                    self._failed = exc
            for item in batch:
                if type(item) is _Barrier:
                    item.done.set()  # type: ignore[union-attr]
            if self._stop and not queue:
                return

    def _write_with_retries(self, events: list[Event]) -> None:
        rows = [(event, event.data if self.redacted_events else self._redact(event)) for event in events]
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            pending, owners = dict(self._pending_calls), dict(self._run_tools)
            self._ended = []
            try:
                self._write_batch(rows)
                break
            except sqlite3.OperationalError:  # locked beyond the busy timeout, disk I/O: try again, same order
                self._pending_calls, self._run_tools = pending, owners
                if attempt == WRITE_ATTEMPTS:
                    raise
                time.sleep(0.05 * 4**attempt)
        for run_id in self._ended:  # those runs are over: forget their redaction state
            self._scrubbers.pop(run_id, None)

    def _redact(self, event: Event) -> dict[str, Any]:
        data = event.data
        if event.type == "tool_call_start":
            arguments = data.get("arguments")
            if isinstance(arguments, (str, bytes)):  # a model's raw JSON text: redact what it says
                with contextlib.suppress(ValueError):
                    data = {**data, "arguments": json.loads(arguments)}
        scrub = self._scrubbers.get(event.run_id)
        if scrub is None:
            scrub = self._scrubbers[event.run_id] = self.redactor.for_run()
        return scrub(data)  # type: ignore[no-any-return]

    def _write_batch(self, rows: list[tuple[Event, dict[str, Any]]]) -> None:
        db = self._write
        assert db is not None
        db.execute("BEGIN IMMEDIATE")
        try:
            # One executemany for the event rows (fewer trips through the GIL), then the rows
            # that events imply (runs, tool logs, model exchanges), in the same order.
            db.executemany(
                "INSERT OR IGNORE INTO events (run_id, seq, type, ts, tool_call_id, step_id, skill, data) VALUES (?,?,?,?,?,?,?,?)",
                [(e.run_id, e.seq, e.type, e.ts, e.tool_call_id, e.step_id, e.skill, _dumps(data)) for e, data in rows],
            )
            for event, data in rows:
                if event.type in _IMPLY_ROWS:
                    self._apply(db, event, data)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _apply(self, db: sqlite3.Connection, event: Event, data: dict[str, Any]) -> None:
        kind = event.type
        if kind == "agent_start":
            db.execute(
                "INSERT OR IGNORE INTO runs (id, kind, name, status, started_at, input, pid, host) VALUES (?,?,?,?,?,?,?,?)",
                (event.run_id, "agent", data.get("model", "?"), "running", event.ts, _dumps(data.get("input")), os.getpid(), _HOST),
            )
        elif kind == "agent_done":
            status = {"answer": "ok", "cancelled": "cancelled"}.get(data.get("stop_reason", ""), "error")
            error = None if status == "ok" else {"code": data.get("stop_reason"), "message": data.get("error")}
            db.execute(
                "UPDATE runs SET status=?, finished_at=?, output=?, error=?, usage=? WHERE id=?",
                (status, event.ts, _dumps(data.get("answer")), _dumps(error) if error else None, _dumps(data.get("usage")), event.run_id),
            )
            self._ended.append(event.run_id)
        elif kind == "tool_call_start":
            self._pending_calls[(event.run_id, event.tool_call_id or "")] = {"input": data.get("arguments"), "ts": event.ts}
            if event.seq == 1:
                self._run_tools[event.run_id] = event.tool_call_id or ""
                db.execute(
                    "INSERT OR IGNORE INTO runs (id, kind, name, status, started_at, input, pid, host) VALUES (?,?,?,?,?,?,?,?)",
                    (event.run_id, "tool", data.get("tool", "?"), "running", event.ts, _dumps(data.get("arguments")), os.getpid(), _HOST),
                )
        elif kind in ("tool_call_result", "tool_call_error"):
            self._finish_call(db, event, data)
        elif kind == "model_exchange":
            db.execute(
                "INSERT OR IGNORE INTO model_exchanges (run_id, seq, tool_call_id, step_id, skill, model, attempt, messages, response) VALUES (?,?,?,?,?,?,?,?,?)",
                (event.run_id, event.seq, event.tool_call_id, event.step_id, event.skill, data.get("model"),
                 data.get("attempt"), _dumps(data.get("messages")), data.get("response") or ""),
            )

    def _finish_call(self, db: sqlite3.Connection, event: Event, data: dict[str, Any]) -> None:
        started = self._pending_calls.pop((event.run_id, event.tool_call_id or ""), {})
        ok = event.type == "tool_call_result"
        error = data.get("error") or {}
        status = "success" if ok else ("timeout" if error.get("code") == "timeout" else "error")
        output = _dumps(data.get("data")) if ok else None
        tool = event.result.tool if event.result is not None else "?"
        db.execute(
            "INSERT INTO tool_logs (run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (event.run_id, event.tool_call_id, tool, _dumps(started.get("input")),
             output[:TOOL_LOG_OUTPUT_CHARS] if output is not None else None, status,
             None if ok else f"{error.get('code')}: {error.get('message')}",
             (data.get("metadata") or {}).get("duration_ms"), event.ts),
        )
        if self._run_tools.get(event.run_id) == (event.tool_call_id or ""):
            del self._run_tools[event.run_id]
            self._ended.append(event.run_id)
            code = error.get("code")
            db.execute(
                "UPDATE runs SET status=?, finished_at=?, output=?, error=?, usage=? WHERE id=?",
                ("ok" if ok else ("cancelled" if code == "cancelled" else "error"), event.ts, output,
                 None if ok else _dumps(error), _dumps((data.get("metadata") or {}).get("usage")), event.run_id),
            )

    def _mark_interrupted(self) -> int:
        """Runs left `running` by a process that is gone (same host) become `interrupted`.

        Their finish time is their last recorded event (or now, if none was recorded).
        """
        assert self._write is not None
        rows = self._write.execute("SELECT id, pid FROM runs WHERE status='running' AND host=?", (_HOST,)).fetchall()
        dead = [run_id for run_id, pid in rows if pid is None or not _alive(pid)]
        if dead:
            now = int(time.time() * 1000)
            self._write.executemany(
                "UPDATE runs SET status='interrupted', "
                "finished_at=COALESCE(finished_at, (SELECT MAX(ts) FROM events WHERE events.run_id = runs.id), ?) "
                "WHERE id=? AND status='running'",
                [(now, run_id) for run_id in dead],
            )
        return len(dead)

    # ─── reading ──────────────────────────────────────────────────────────────────────

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A short-lived connection of its own (the writer's stays with the writer thread)."""
        try:
            connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the run store {self.path}: {exc}") from None
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            yield connection
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the run store {self.path}: {exc}") from None
        finally:
            connection.close()

    def runs(self, *, tool: str | None = None, status: str | None = None, since_ms: int | None = None, limit: int = 20) -> list[RunRecord]:
        """Recent runs, newest first. `since_ms` is an absolute time in ms since the epoch."""
        where, params = _where({"name = ?": tool, "status = ?": status, "started_at >= ?": since_ms})
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE {where} ORDER BY started_at DESC, rowid DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [_run(row) for row in rows]

    def run(self, run_id: str) -> RunRecord | None:
        """One run by id, or by a prefix of its id that matches one run only.

        None if nothing matches; StoreError if the prefix matches several runs.
        """
        if not run_id:
            return None
        with self._read() as db:
            row = db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:  # a prefix: a range on the primary key (no LIKE: `_` is a wildcard there)
                rows = db.execute(
                    f"SELECT {_RUN_COLUMNS} FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
                    (run_id, run_id + "\U0010ffff"),
                ).fetchall()
                if len(rows) > 1:
                    shown = ", ".join(r[0] for r in rows[:5]) + (", …" if len(rows) > 5 else "")
                    raise StoreError(f"run id prefix {run_id!r} matches several runs ({shown}); give more of the id")
                row = rows[0] if rows else None
        return _run(row) if row else None

    def events(self, run_id: str, *, after_seq: int = 0) -> list[dict[str, Any]]:
        """A run's events in `seq` order, as `Event.to_dict()` gives them (redacted)."""
        with self._read() as db:
            rows = db.execute(
                "SELECT type, run_id, seq, ts, tool_call_id, step_id, skill, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
                (run_id, after_seq),
            ).fetchall()
        out = []
        for kind, rid, seq, ts, call, step, skill, data in rows:
            event: dict[str, Any] = {"type": kind, "run_id": rid, "seq": seq, "ts": ts}
            for key, value in (("tool_call_id", call), ("step_id", step), ("skill", skill)):
                if value is not None:
                    event[key] = value
            event["data"] = json.loads(data)
            out.append(event)
        return out

    def model_exchanges(self, run_id: str) -> list[dict[str, Any]]:
        """The prompts and answers of a run's model calls, in order (what replay answers from)."""
        with self._read() as db:
            rows = db.execute(
                "SELECT seq, tool_call_id, step_id, skill, model, attempt, messages, response FROM model_exchanges WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
        return [
            {"seq": seq, "tool_call_id": call, "step_id": step, "skill": skill, "model": model, "attempt": attempt,
             "messages": json.loads(messages), "response": response}
            for seq, call, step, skill, model, attempt, messages, response in rows
        ]

    def tool_logs(self, *, tool: str | None = None, status: str | None = None, run_id: str | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Tool execution logs, newest first (status success | error | timeout)."""
        where, params = _where({"tool = ?": tool, "status = ?": status, "run_id = ?": run_id})
        with self._read() as db:
            rows = db.execute(
                f"SELECT id, run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at "
                f"FROM tool_logs WHERE {where} ORDER BY id DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        keys = ("id", "run_id", "tool_call_id", "tool", "input", "output", "status", "error_message", "duration_ms", "created_at")
        return [dict(zip(keys, row)) for row in rows]

    def prune(self, older_than_ms: int) -> int:
        """Delete runs (and their events, logs and exchanges) that started before now − older_than_ms.

        Runs still `running` are kept. Returns how many runs were deleted.
        """
        cutoff = int(time.time() * 1000) - older_than_ms
        old = "SELECT id FROM runs WHERE started_at < ? AND status != 'running'"
        with self._read() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                for table in ("events", "model_exchanges", "tool_logs"):
                    db.execute(f"DELETE FROM {table} WHERE run_id IN ({old})", (cutoff,))
                count = db.execute(f"DELETE FROM runs WHERE id IN ({old})", (cutoff,)).rowcount
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return count


def _where(conditions: dict[str, Any]) -> tuple[str, list[Any]]:
    """`{"name = ?": value}` → an SQL condition and its parameters; empty values (None, "") are skipped."""
    used = [(clause, value) for clause, value in conditions.items() if value is not None and value != ""]
    return " AND ".join(clause for clause, _ in used) or "1=1", [value for _, value in used]


def _run(row: Iterable[Any]) -> RunRecord:
    rid, kind, name, status, started, finished, input, output, error, usage, parent = row
    return RunRecord(rid, kind, name, status, started, finished, _loads(input), _loads(output), _loads(error), _loads(usage), parent)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
