"""The shared run store: PostgreSQL, for several processes (service replicas) at once.

The same tables, migrations and writer as SQLite (base.py, schema.py): the listener appends,
a writer thread sends each batch's ready rows as one JSON array (one parameter: the cheapest
for this process; PostgreSQL unpacks it with json_array_elements, parsing no event's data)
and the rows they imply (rows.py) in the same pipeline, one transaction per batch, events
idempotent (a batch sent twice changes nothing). The statement that inserts a batch also NOTIFYs EVENTS_CHANNEL with each run's last
seq, so followers in other processes hear of new events when the batch commits.

The writer has a connection of its own; reads, tool settings and notify() borrow one from a
small pool (psycopg_pool); listen() has one more, on a thread of its own. While the database
cannot be reached, the writer keeps the batches and tries again (base.py). Migrations run
under an advisory lock, so processes that open a new database at once do not race.

Imported only when a postgresql:// URL is opened (open.py): the default needs no psycopg.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from typing import Any, Callable, Sequence

import orjson
import psycopg
from psycopg import sql as pgsql
from psycopg_pool import ConnectionPool

from ..logging import logger
from ..safety.redaction import Redactor
from .base import (
    HEARTBEAT_S, HOST, PROCESS_FORGOTTEN_MS, PROCESS_TIMEOUT_MS, RETRY_MAX_S, Store, StoreError, StoreUnavailable, _alive,
)
from .urls import display_url
from .rows import Batch
from .schema import (
    EVENTS_CHANNEL, INSERT_EVENTS_PG, MIGRATIONS, POSTGRES_BULK, POSTGRESQL, TOOL_SETTINGS_CHANNEL, SchemaTooNew, implied_statements, postgres_ddl,
)

CONNECT_TIMEOUT_S = 5  # opening the store, and each attempt of the writer to reconnect
READ_TIMEOUT_S = 10.0  # a read waits this long for a pooled connection
LISTEN_POLL_S = 0.2  # the listener thread looks for new channels (and stop) this often
MIGRATION_LOCK = 0x736B696C6C79  # pg_advisory_xact_lock key ("skilly"): one migrating process at a time
_PLACEHOLDERS: dict[str, str] = {}


# HEARTBEAT_S, PROCESS_TIMEOUT_MS, PROCESS_FORGOTTEN_MS (base.py): the leases, as with SQLite
_NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint"  # the database's clock: one for every host
_HEARTBEAT = (
    f"INSERT INTO processes (id, host, pid, heartbeat_at) VALUES (%s, %s, %s, {_NOW_MS}) "
    "ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at"
)
_INTERRUPT_DEAD = f"""
    UPDATE runs SET status = 'interrupted',
        finished_at = COALESCE((SELECT MAX(ts) FROM events WHERE events.run_id = runs.id), {_NOW_MS}),
        error = json_build_object('code', 'interrupted', 'message',
            'the process running it stopped (no heartbeat from ' || runs.host || ':' || runs.pid || ' for '
            || (%s / 1000) || ' s); a pending approval was closed')::text
    WHERE status = 'running' AND EXISTS (
        SELECT 1 FROM processes AS p WHERE p.host = runs.host AND p.pid = runs.pid AND p.heartbeat_at < {_NOW_MS} - %s)
      AND NOT EXISTS (SELECT 1 FROM run_executors AS x WHERE x.run_id = runs.id)
    RETURNING id"""
# A run that executes elsewhere (run_executors) whose row's process is gone: a live process takes it
# over (its host and pid on the row), once; SKIP LOCKED, so two adopters never take the same run.
_ADOPT = f"""
    UPDATE runs SET host = %s, pid = %s
    WHERE status = 'running' AND id IN (
        SELECT r.id FROM runs AS r JOIN run_executors AS x ON x.run_id = r.id
        WHERE r.status = 'running' AND x.executor = %s AND NOT EXISTS (
            SELECT 1 FROM processes AS p WHERE p.host = r.host AND p.pid = r.pid AND p.heartbeat_at >= {_NOW_MS} - %s)
        ORDER BY r.started_at LIMIT %s FOR UPDATE OF r SKIP LOCKED)
      AND EXISTS (SELECT 1 FROM processes AS me WHERE me.host = %s AND me.pid = %s AND me.heartbeat_at >= {_NOW_MS} - %s)
    RETURNING id, kind, started_at"""
_INTERRUPT_ONE = f"""
    UPDATE runs SET status = 'interrupted',
        finished_at = COALESCE((SELECT MAX(ts) FROM events WHERE events.run_id = runs.id), {_NOW_MS}),
        error = json_build_object('code', 'interrupted', 'message', %s::text)::text
    WHERE id = %s AND status = 'running'"""


def _pg(query: str) -> str:
    """The shared queries' `?` placeholders as psycopg's `%s` (cached: the same few queries)."""
    out = _PLACEHOLDERS.get(query)
    if out is None:
        out = _PLACEHOLDERS[query] = query.replace("%", "%%").replace("?", "%s")
    return out


def _pg_quoted(query: str) -> str:
    """As `_pg`, leaving a `?` inside a quoted SQL literal alone."""
    return re.sub(r"'[^']*'|\?", lambda m: "%s" if m.group() == "?" else m.group(), query.replace("%", "%%"))


IMPLIED = {name: _pg_quoted(sql) for name, sql in implied_statements(POSTGRESQL).items()}


class PostgresStore(Store):
    """The run store in the PostgreSQL database at `url` (postgresql://user[:password]@host:port/db)."""

    _NEWEST = "r.started_at DESC, r.id DESC"
    _PREFIX = 'r.id COLLATE "C" >= ? AND r.id COLLATE "C" < ?'  # byte order, whatever the database's collation
    notices_cross_processes = True  # INSERT_EVENTS notifies through the database

    def __init__(self, url: str, *, redactor: Redactor | None = None, redacted_events: bool = False):
        self.url = url
        self.where = display_url(url)
        self._password = _password(url)
        self._write: psycopg.Connection[Any] | None = None
        try:
            self._write = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            self.schema_version = migrate(self._write)
            self.interrupted = self._mark_interrupted()
        except SchemaTooNew as exc:
            self._close_writer()
            raise StoreError(
                f"the run store {self.where} was written by a newer skillyard (schema version {exc.version}; this one "
                f"knows up to {len(MIGRATIONS)}): upgrade skillyard, point SKILLYARD_STORE_URL (or store.url) at "
                "another database, or run with --no-store"
            ) from None
        except psycopg.Error as exc:
            self._close_writer()
            raise StoreError(
                f"cannot open the run store {self.where}: {self._reason(exc)} — check that PostgreSQL runs there and "
                "the URL (SKILLYARD_STORE_URL, or store.url in config/engine.yaml), or run with --no-store"
            ) from None
        self._pool = ConnectionPool(
            url, min_size=1, max_size=4, kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            timeout=READ_TIMEOUT_S, check=ConnectionPool.check_connection, name="skillyard-store", num_workers=1, open=True,
        )
        self._notices = _Notices(url, self.where)
        self._process = f"{HOST}:{os.getpid()}"
        self._next_heartbeat = 0.0
        self._start_writer(redactor, redacted_events)

    def __enter__(self) -> "PostgresStore":
        return self

    def _reason(self, exc: BaseException) -> str:
        """An error's text without the URL's password (a driver may echo connection strings)."""
        text = str(exc).strip() or type(exc).__name__
        return text.replace(self._password, "***") if self._password else text

    # ─── writing (the writer thread) ────────────────────────────────────────────────────

    def _writer_connection(self) -> psycopg.Connection[Any]:
        if self._write is None or self._write.closed:
            self._write = None
            try:
                self._write = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            except psycopg.Error as exc:
                raise StoreUnavailable(self._reason(exc)) from None
        return self._write

    def _write_rows(self, rows: Batch) -> None:
        """One transaction: the events, then the rows they imply."""
        try:
            self._write_batch(rows)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:  # the server went away, restarts…
            self._close_writer()
            raise StoreUnavailable(self._reason(exc)) from None
        except psycopg.Error:  # a row PostgreSQL refuses (e.g. \\u0000 in a text column): the others still go
            self._write_one_by_one(rows)

    def _write_batch(self, rows: Batch) -> None:
        db = self._writer_connection()
        with db.transaction():
            db.execute(INSERT_EVENTS_PG, (orjson.dumps(rows.events).decode(),))
            for name, params in rows.implied_by_statement():
                bulk = POSTGRES_BULK.get(name)
                if bulk is not None:
                    db.execute(bulk, (orjson.dumps(list(params)).decode(),))
                else:
                    with db.cursor() as cursor:
                        cursor.executemany(IMPLIED[name], params)

    def _write_one_by_one(self, rows: Batch) -> None:
        """Each event (with the rows it implies) in a transaction of its own; an event that
        still fails is counted (`write`)."""
        for index in range(rows.count):
            single = rows.one(index)
            try:
                self._write_batch(single)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._close_writer()
                raise StoreUnavailable(self._reason(exc)) from None
            except psycopg.Error as exc:
                run_id, seq, kind = single.events[:3]
                self._failed = exc
                self._count_failure("write", 1, f"event {kind} #{seq} of run {run_id}: {self._reason(exc)}")

    def _write_side(self) -> None:
        if not self._side:
            return
        side, self._side = self._side, []
        try:
            db = self._writer_connection()
            with db.transaction():
                for sql, params in side:
                    db.execute(_pg(sql), params)
        except (StoreUnavailable, psycopg.OperationalError, psycopg.InterfaceError):
            self._side[:0] = side  # kept, in order, for the next round (the events wait too)
            self._close_writer()
        except psycopg.Error as exc:
            self._failed = exc

    # ─── processes: heartbeats, and the runs of a process that died ─────────────────────

    def _housekeeping(self) -> None:
        """Every HEARTBEAT_S: say this process is alive, and interrupt the runs of processes
        whose heartbeat is older than PROCESS_TIMEOUT_S (killed, or cut off), closing their
        pending approvals and waking their followers. Any process sharing the store does it,
        so the runs of a dead replica end while one survives."""
        now = time.monotonic()
        if now < self._next_heartbeat:
            return
        self._next_heartbeat = now + HEARTBEAT_S
        try:
            db = self._writer_connection()
            with db.transaction():
                db.execute(_HEARTBEAT, (self._process, HOST, os.getpid()))
                reaped = [row[0] for row in db.execute(_INTERRUPT_DEAD, (PROCESS_TIMEOUT_MS, PROCESS_TIMEOUT_MS)).fetchall()]
                if reaped:
                    db.execute("UPDATE approvals SET status = 'closed' WHERE status = 'pending' AND run_id = ANY(%s)", (reaped,))
                    for run_id in reaped:
                        db.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, f"{run_id} end"))
                db.execute(f"DELETE FROM processes WHERE heartbeat_at < {_NOW_MS} - %s", (PROCESS_FORGOTTEN_MS,))
        except (StoreUnavailable, psycopg.OperationalError, psycopg.InterfaceError):
            self._close_writer()  # the events' next attempt reconnects
        except psycopg.Error as exc:
            logger.error("run store: heartbeat failed", store=self.where, error=self._reason(exc))
        else:
            if reaped:
                logger.warning("run store: interrupted the runs of a process that stopped", store=self.where, runs=len(reaped))

    # ─── runs that execute elsewhere (Temporal workers) ─────────────────────────────────

    def record_executor(self, run_id: str, executor: str) -> None:
        """`run_id` executes on `executor`'s workers, not in this process: if this process dies,
        the run is not interrupted but adopted (written by the writer thread, before the run's events)."""
        self._side.append(("INSERT INTO run_executors (run_id, executor) VALUES (?, ?) ON CONFLICT DO NOTHING",
                           (run_id, executor)))

    def executor(self, run_id: str) -> str | None:
        """Where `run_id` executes when not in the process that wrote its row (`temporal`), else None."""
        rows = self._fetch("SELECT executor FROM run_executors WHERE run_id = ?", (run_id,))
        return rows[0][0] if rows else None

    def adopt_orphans(self, executor: str, limit: int = 20) -> list[tuple[str, str, int]]:
        """Take over runs of `executor` whose process stopped (no heartbeat for PROCESS_TIMEOUT_MS):
        their rows now name this process. Only while this process's own heartbeat is fresh (else
        others would take them back at once). [(run_id, kind, started_at)]; StoreError when unreachable."""
        try:
            with self._pool.connection() as db, db.transaction():
                return [tuple(row) for row in db.execute(  # type: ignore[misc]
                    _ADOPT, (HOST, os.getpid(), executor, PROCESS_TIMEOUT_MS, limit, HOST, os.getpid(),
                             PROCESS_TIMEOUT_MS)).fetchall()]
        except psycopg.Error as exc:
            raise StoreError(f"cannot write to the run store {self.where}: {self._reason(exc)}") from None

    def interrupt(self, run_id: str, message: str) -> bool:
        """End a running run as `interrupted` (an adopted run whose execution is gone); wakes its followers."""
        try:
            with self._pool.connection() as db, db.transaction():
                ended = db.execute(_INTERRUPT_ONE, (message, run_id)).rowcount
                if ended:
                    db.execute("UPDATE approvals SET status = 'closed' WHERE status = 'pending' AND run_id = %s", (run_id,))
                    db.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, f"{run_id} end"))
        except psycopg.Error as exc:
            raise StoreError(f"cannot write to the run store {self.where}: {self._reason(exc)}") from None
        return bool(ended)

    def prune(self, older_than_ms: int) -> int:
        """As Store.prune; the pruned runs' executor rows go too."""
        cutoff = int(time.time() * 1000) - older_than_ms
        self._transaction([("DELETE FROM run_executors WHERE run_id IN "
                            "(SELECT id FROM runs WHERE started_at < ? AND status != 'running')", (cutoff,))])
        return super().prune(older_than_ms)

    def _forget_process(self) -> None:
        """A clean stop: this process no longer holds runs (nobody has to wait for its timeout)."""
        with contextlib.suppress(Exception):
            with self._pool.connection() as db:
                db.execute("DELETE FROM processes WHERE id = %s", (self._process,))

    def _mark_interrupted(self) -> int:
        """Runs of this host left `running` by a process that is gone become `interrupted`."""
        assert self._write is not None
        rows = self._write.execute(
            "SELECT id, pid FROM runs WHERE status='running' AND host=%s "
            "AND NOT EXISTS (SELECT 1 FROM run_executors AS x WHERE x.run_id = runs.id)", (HOST,)).fetchall()
        dead = [run_id for run_id, pid in rows if pid is None or not _alive(pid)]
        if dead:
            now = int(time.time() * 1000)
            with self._write.transaction(), self._write.cursor() as cursor:
                cursor.executemany(
                    "UPDATE runs SET status='interrupted', "
                    "finished_at=COALESCE(finished_at, (SELECT MAX(ts) FROM events WHERE events.run_id = runs.id), %s) "
                    "WHERE id=%s AND status='running'",
                    [(now, run_id) for run_id in dead],
                )
        return len(dead)

    def _close_writer(self) -> None:
        if self._write is not None:
            with contextlib.suppress(Exception):
                self._write.close()
            self._write = None

    def _close_connection(self) -> None:
        self._close_writer()
        if hasattr(self, "_process"):
            self._forget_process()
        if hasattr(self, "_pool"):
            with contextlib.suppress(Exception):
                self._pool.close(timeout=2)
        if hasattr(self, "_notices"):
            self._notices.close()

    # ─── reading, tool settings ─────────────────────────────────────────────────────────

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._pool.connection() as db:
                return db.execute(_pg(sql), params).fetchall()
        except psycopg.Error as exc:  # PoolTimeout is one too
            raise StoreError(f"cannot read the run store {self.where}: {self._reason(exc)}") from None

    def _transaction(self, statements: list[tuple[str, Sequence[Any]]]) -> list[int]:
        try:
            with self._pool.connection() as db, db.transaction():
                return [db.execute(_pg(sql), params).rowcount for sql, params in statements]
        except psycopg.Error as exc:
            raise StoreError(f"cannot write to the run store {self.where}: {self._reason(exc)}") from None

    def _settings_notice(self, name: str) -> list[tuple[str, Sequence[Any]]]:
        return [("SELECT pg_notify(?, ?)", (TOOL_SETTINGS_CHANNEL, f"{self.origin} {name}"))]

    # ─── notifications: LISTEN/NOTIFY ───────────────────────────────────────────────────

    def notify(self, channel: str, payload: str) -> None:
        """NOTIFY `channel` (every process listening on this database hears it, this one too).
        The payload must be shorter than 8,000 bytes (PostgreSQL's limit)."""
        self._transaction([("SELECT pg_notify(?, ?)", (channel, payload))])

    def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """As Store.listen, across processes. After the listening connection was lost and made
        again, every callback gets the payload "*": notices may have been missed, re-read."""
        return self._notices.add(channel, callback)

    def _close_notifications(self) -> None:
        self._notices.close()


class _Notices:
    """One connection that LISTENs on every channel someone listens to, on a thread of its own.

    The thread waits for notices at most LISTEN_POLL_S at a time, then LISTENs on channels
    added meanwhile (a connection is used by one thread at a time). It reconnects with
    backoff when the connection is lost.
    """

    def __init__(self, url: str, where: str) -> None:
        self._url = url
        self._where = where
        self._lock = threading.Lock()
        self._callbacks: dict[str, list[Callable[[str], None]]] = {}
        self._listening: set[str] = set()
        self._changed = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stop = False

    def add(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        with self._changed:
            self._callbacks.setdefault(channel, []).append(callback)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="skillyard-store-listen", daemon=True)
                self._thread.start()
            if not self._changed.wait_for(lambda: channel in self._listening or self._stop, timeout=CONNECT_TIMEOUT_S + 2):
                logger.error("run store: not listening yet (the database cannot be reached); notices will come once it is",
                             store=self._where, channel=channel)

        def stop() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._callbacks.get(channel, []).remove(callback)

        return stop

    def close(self) -> None:
        with self._changed:
            self._stop = True
            self._changed.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        backoff = 0.1
        reconnected = False
        while not self._stop:
            try:
                with psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as db:
                    with self._lock:
                        self._listening = set()
                    if reconnected:
                        self._dispatch_all("*")
                    backoff = 0.1
                    self._serve(db)
            except psycopg.Error as exc:
                if self._stop:
                    return
                logger.warning("run store: the listening connection was lost; connecting again", store=self._where,
                               error=type(exc).__name__)
                reconnected = True
                time.sleep(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)

    def _serve(self, db: psycopg.Connection[Any]) -> None:
        while not self._stop:
            with self._lock:
                new = [channel for channel in self._callbacks if channel not in self._listening]
            for channel in new:
                db.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel)))
            if new:
                with self._changed:
                    self._listening.update(new)
                    self._changed.notify_all()
            for notice in db.notifies(timeout=LISTEN_POLL_S):
                self._dispatch(notice.channel, notice.payload)

    def _dispatch_all(self, payload: str) -> None:
        with self._lock:
            channels = list(self._callbacks)
        for channel in channels:
            self._dispatch(channel, payload)

    def _dispatch(self, channel: str, payload: str) -> None:
        with self._lock:
            callbacks = list(self._callbacks.get(channel, ()))
        for callback in callbacks:
            try:
                callback(payload)
            except Exception as exc:  # noqa: BLE001 - a listener's bug must not stop the others
                logger.error("run store: a notification listener failed", channel=channel, error=f"{type(exc).__name__}: {exc}")


def migrate(connection: psycopg.Connection[Any]) -> int:
    """Apply the migrations this database has not seen (PostgreSQL's rendering of MIGRATIONS);
    returns the schema version. An up-to-date database is only read. Otherwise one process at
    a time migrates (advisory lock, in the migration's transaction)."""
    version = _version(connection)
    if version == len(MIGRATIONS):
        return version
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = connection.execute("SELECT version FROM schema_version").fetchone()
        version = row[0] if row else 0
        if version > len(MIGRATIONS):
            raise SchemaTooNew(version)
        for number in range(version, len(MIGRATIONS)):
            for statement in (part.strip() for part in postgres_ddl(MIGRATIONS[number]).split(";")):
                if statement:
                    connection.execute(statement)
        if row is None:
            connection.execute("INSERT INTO schema_version (version) VALUES (%s)", (len(MIGRATIONS),))
        elif version != len(MIGRATIONS):
            connection.execute("UPDATE schema_version SET version = %s", (len(MIGRATIONS),))
    return len(MIGRATIONS)


def _version(connection: psycopg.Connection[Any]) -> int | None:
    try:
        row = connection.execute("SELECT version FROM schema_version").fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    version = row[0] if row else None
    if version is not None and version > len(MIGRATIONS):
        raise SchemaTooNew(version)
    return version


def _password(url: str) -> str:
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url)
        return parts.password or (parse_qs(parts.query).get("password") or [""])[0]
    except ValueError:
        return ""
