"""The embedded run store: SQLite in WAL mode, written off the hot path.

`RunStore.listener` is an event listener that only appends the event to a queue (well under
a microsecond). A writer thread turns events into rows in batches, one transaction per
batch, in arrival order, so a run's events are stored in `seq` order even when it fails or
is cancelled. Many processes may share one database file (WAL + busy timeout). A run that was
`running` when its process died is marked `interrupted` the next time the store opens.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..errors import SkillyardError
from ..events import Event
from ..redaction import Redactor
from .schema import migrate

TOOL_LOG_OUTPUT_CHARS = 10_000
FLUSH_INTERVAL_S = 0.05
BUSY_TIMEOUT_MS = 10_000
_HOST = socket.gethostname()


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


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("PRAGMA foreign_keys = ON")
    return connection


class RunStore:
    def __init__(self, path: str | Path, *, redactor: Redactor | None = None):
        self.path = Path(path)
        self.redactor = redactor or Redactor()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write = connect(self.path)
            migrate(self._write)
            self.interrupted = self._mark_interrupted()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"cannot open the run store {self.path}: {exc} — check that the directory is writable and the file "
                "is a skillyard store (move it away to start a new one), or run with --no-store"
            ) from None
        self._queue: deque[Event] = deque()
        self._wake = threading.Event()
        self._stop = False
        self._idle = threading.Condition()
        self._pending_calls: dict[str, dict[str, Any]] = {}
        self._run_tools: dict[str, str] = {}  # run_id → tool_call_id that owns the run (tool runs)
        self._failed: BaseException | None = None
        self._writer = threading.Thread(target=self._write_loop, name="skillyard-store", daemon=True)
        self._writer.start()

    # ─── writing ──────────────────────────────────────────────────────────────────────

    def listener(self, event: Event) -> None:
        """The engine calls this for every event: O(1), never blocks the event loop."""
        self._queue.append(event)
        if event.type in ("tool_call_result", "tool_call_error", "agent_done"):
            self._wake.set()

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until everything queued so far is written."""
        deadline = time.monotonic() + timeout
        self._wake.set()
        with self._idle:
            while self._queue and time.monotonic() < deadline:
                self._idle.wait(0.01)
                self._wake.set()
        if self._failed is not None:
            raise StoreError(f"writing to the run store {self.path} failed: {self._failed}")

    def close(self) -> None:
        self.flush()
        self._stop = True
        self._wake.set()
        self._writer.join(timeout=10)
        self._write.close()

    def _write_loop(self) -> None:
        while True:
            self._wake.wait(FLUSH_INTERVAL_S)
            self._wake.clear()
            batch: list[Event] = []
            while self._queue:
                batch.append(self._queue.popleft())
            if batch:
                try:
                    self._write_batch(batch)
                except Exception as exc:  # noqa: BLE001 - reported by flush(); the engine keeps running
                    self._failed = exc
            with self._idle:
                self._idle.notify_all()
            if self._stop and not self._queue:
                return

    def _write_batch(self, batch: list[Event]) -> None:
        db = self._write
        redact = self.redactor.redact
        db.execute("BEGIN IMMEDIATE")
        try:
            for event in batch:
                data = redact(event.data)
                db.execute(
                    "INSERT OR IGNORE INTO events (run_id, seq, type, ts, tool_call_id, step_id, skill, data) VALUES (?,?,?,?,?,?,?,?)",
                    (event.run_id, event.seq, event.type, event.ts, event.tool_call_id, event.step_id, event.skill, _dumps(data)),
                )
                self._apply(db, event, data)
            db.execute("COMMIT")
        except BaseException:
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
        elif kind == "tool_call_start":
            self._pending_calls[event.tool_call_id or ""] = {"input": data.get("arguments"), "ts": event.ts}
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
        started = self._pending_calls.pop(event.tool_call_id or "", {})
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
        if self._run_tools.get(event.run_id) == event.tool_call_id:
            del self._run_tools[event.run_id]
            code = error.get("code")
            db.execute(
                "UPDATE runs SET status=?, finished_at=?, output=?, error=?, usage=? WHERE id=?",
                ("ok" if ok else ("cancelled" if code == "cancelled" else "error"), event.ts, output,
                 None if ok else _dumps(error), _dumps((data.get("metadata") or {}).get("usage")), event.run_id),
            )

    def _mark_interrupted(self) -> int:
        """Runs left `running` by a process that is gone (same host) become `interrupted`."""
        rows = self._write.execute("SELECT id, pid FROM runs WHERE status='running' AND host=?", (_HOST,)).fetchall()
        dead = [run_id for run_id, pid in rows if pid is None or not _alive(pid)]
        if dead:
            self._write.executemany(
                "UPDATE runs SET status='interrupted', finished_at=COALESCE(finished_at, ?) WHERE id=? AND status='running'",
                [(int(time.time() * 1000), run_id) for run_id in dead],
            )
        return len(dead)

    # ─── reading ──────────────────────────────────────────────────────────────────────

    def _read(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return connection

    def runs(self, *, tool: str | None = None, status: str | None = None, since_ms: int | None = None, limit: int = 20) -> list[RunRecord]:
        """Recent runs, newest first."""
        where, params = ["1=1"], []
        if tool:
            where.append("name = ?")
            params.append(tool)
        if status:
            where.append("status = ?")
            params.append(status)
        if since_ms is not None:
            where.append("started_at >= ?")
            params.append(since_ms)
        with self._read() as db:
            rows = db.execute(
                f"SELECT id, kind, name, status, started_at, finished_at, input, output, error, usage, parent_run_id "
                f"FROM runs WHERE {' AND '.join(where)} ORDER BY started_at DESC, rowid DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [_run(row) for row in rows]

    def run(self, run_id: str) -> RunRecord | None:
        with self._read() as db:
            row = db.execute(
                "SELECT id, kind, name, status, started_at, finished_at, input, output, error, usage, parent_run_id FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                matches = db.execute("SELECT id FROM runs WHERE id LIKE ? LIMIT 2", (run_id + "%",)).fetchall()
                if len(matches) == 1:
                    return self.run(matches[0][0])
        return _run(row) if row else None

    def events(self, run_id: str, *, after_seq: int = 0) -> list[dict[str, Any]]:
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

    def tool_logs(self, *, tool: str | None = None, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        where, params = ["1=1"], []
        if tool:
            where.append("tool = ?")
            params.append(tool)
        if status:
            where.append("status = ?")
            params.append(status)
        with self._read() as db:
            rows = db.execute(
                f"SELECT id, run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at "
                f"FROM tool_logs WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        keys = ("id", "run_id", "tool_call_id", "tool", "input", "output", "status", "error_message", "duration_ms", "created_at")
        return [dict(zip(keys, row)) for row in rows]

    def prune(self, older_than_ms: int) -> int:
        """Delete runs (and everything of theirs) that started before now − older_than_ms."""
        cutoff = int(time.time() * 1000) - older_than_ms
        with self._read() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM runs WHERE started_at < ? AND status != 'running'", (cutoff,))]
            for table in ("events", "model_exchanges", "tool_logs"):
                db.executemany(f"DELETE FROM {table} WHERE run_id = ?", [(i,) for i in ids])
            db.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in ids])
        return len(ids)


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
