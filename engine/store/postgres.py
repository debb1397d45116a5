"""The shared run store: PostgreSQL, for several processes (service replicas) at once.

The same tables, migrations and writer as SQLite (writer.py, schema.py): the listener appends,
a writer thread sends each batch's ready rows as one JSON array (one parameter: the cheapest
for this process; PostgreSQL unpacks it with json_array_elements, parsing no event's data)
and the rows they imply (rows.py) in the same pipeline, one transaction per batch, events
idempotent (a batch sent twice changes nothing). The statement that inserts a batch also NOTIFYs EVENTS_CHANNEL with each run's last
seq, so followers in other processes hear of new events when the batch commits.

The writer has a connection of its own; reads, tool settings and notify() borrow one from a
small pool (psycopg_pool); listen() has one more, on a thread of its own (postgres_notices.py).
While the database cannot be reached, the writer keeps the batches and tries again (writer.py).
Migrations run under an advisory lock, so processes that open a new database at once do not race.

`PostgresDatabase` is the dialect (database.py's interface); `PostgresStore` the Store over it,
with what only a shared store does: runs that execute elsewhere (Temporal workers) are
recorded, adopted when their process stops, and interrupted.

Imported only when a postgresql:// URL is opened (open.py): the default needs no psycopg.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
import re
import time
from typing import Any, Sequence

import orjson
import psycopg
from psycopg_pool import ConnectionPool

from ..logging import logger
from ..safety.redaction import Redactor
from .base import Store
from .database import HEARTBEAT_S, HOST, PROCESS_FORGOTTEN_MS, PROCESS_TIMEOUT_MS, Database, Statement, is_alive
from .errors import StoreError, StoreUnavailable
from .postgres_notices import CONNECT_TIMEOUT_S, PostgresNotices
from .rows import Batch
from .schema import (
    EVENTS_CHANNEL,
    INSERT_EVENTS_PG,
    MIGRATIONS,
    POSTGRES_BULK,
    POSTGRESQL,
    TOOL_SETTINGS_CHANNEL,
    SchemaTooNew,
    implied_statements,
    postgres_ddl,
)
from .urls import display_url

READ_TIMEOUT_S = 10.0  # a read waits this long for a pooled connection
MIGRATION_LOCK = 0x736B696C6C79  # pg_advisory_xact_lock key ("skilly"): one migrating process at a time
_PLACEHOLDERS: dict[str, str] = {}


# HEARTBEAT_S, PROCESS_TIMEOUT_MS, PROCESS_FORGOTTEN_MS (database.py): the leases, as with SQLite
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


def _run_side(db: "psycopg.Connection[Any]", statements: Sequence[Statement]) -> None:
    """Side writes (Writer.add_side), in order, in the transaction under way; a statement's
    run of rows in one `executemany` (pipelined: one round trip, not one per owner of a call)."""
    with db.cursor() as cursor:
        for sql, rows in itertools.groupby(statements, key=operator.itemgetter(0)):
            cursor.executemany(_pg(sql), [params for _, params in rows])


def _pg_quoted(query: str) -> str:
    """As `_pg`, leaving a `?` inside a quoted SQL literal alone."""
    return re.sub(r"'[^']*'|\?", lambda m: "%s" if m.group() == "?" else m.group(), query.replace("%", "%%"))


IMPLIED = {name: _pg_quoted(sql) for name, sql in implied_statements(POSTGRESQL).items()}


class PostgresDatabase(Database):
    """The PostgreSQL database at `url` (postgresql://user[:password]@host:port/db), as a Store's parts use it."""

    NEWEST = "r.started_at DESC, r.id DESC"
    PREFIX = 'r.id COLLATE "C" >= ? AND r.id COLLATE "C" < ?'  # byte order, whatever the database's collation
    notices_cross_processes = True  # INSERT_EVENTS notifies through the database

    def __init__(self, url: str) -> None:
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
                f"cannot open the run store {self.where}: {self.reason(exc)} — check that PostgreSQL runs there and "
                "the URL (SKILLYARD_STORE_URL, or store.url in config/engine.yaml), or run with --no-store"
            ) from None
        self._pool = ConnectionPool(
            url, min_size=1, max_size=4, kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            timeout=READ_TIMEOUT_S, check=ConnectionPool.check_connection, name="skillyard-store", num_workers=1, open=True,
        )
        self._process = f"{HOST}:{os.getpid()}"
        self._next_heartbeat = 0.0

    def reason(self, exc: BaseException) -> str:
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
                raise StoreUnavailable(self.reason(exc)) from None
        return self._write

    def write_rows(self, rows: Batch, side: Sequence[Statement] = ()) -> list[tuple[str, BaseException]]:
        """One transaction: the side writes, the events, then the rows they imply. A batch
        PostgreSQL refuses (e.g. \\u0000 in a text column) is written one event at a time: the
        others still go (with side writes, it is raised: the writer writes them apart first)."""
        try:
            self._write_batch(rows, side)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:  # the server went away, restarts…
            self._close_writer()
            raise StoreUnavailable(self.reason(exc)) from None
        except psycopg.Error:
            if side:
                raise
            return self._write_one_by_one(rows)
        return []

    def _write_batch(self, rows: Batch, side: Sequence[Statement] = ()) -> None:
        db = self._writer_connection()
        with db.transaction():
            if side:
                _run_side(db, side)
            if rows.events:
                db.execute(INSERT_EVENTS_PG, (orjson.dumps(rows.events).decode(),))
            for name, params in rows.implied_by_statement():
                bulk = POSTGRES_BULK.get(name)
                if bulk is not None:
                    db.execute(bulk, (orjson.dumps(list(params)).decode(),))
                else:
                    with db.cursor() as cursor:
                        cursor.executemany(IMPLIED[name], params)

    def _write_one_by_one(self, rows: Batch) -> list[tuple[str, BaseException]]:
        """Each event (with the rows it implies) in a transaction of its own; the events that
        still fail, as (what, why)."""
        lost: list[tuple[str, BaseException]] = []
        for index in range(rows.count):
            single = rows.one(index)
            try:
                self._write_batch(single)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._close_writer()
                raise StoreUnavailable(self.reason(exc)) from None
            except psycopg.Error as exc:
                run_id, seq, kind = single.events[:3]
                lost.append((f"event {kind} #{seq} of run {run_id}: {self.reason(exc)}", exc))
        return lost

    def write_side(self, statements: list[Statement]) -> None:
        """One transaction; a statement's run of rows in one `executemany` (pipelined: one round
        trip, not one per owner of a call — each round trip is also a GIL hand-over to win back)."""
        try:
            db = self._writer_connection()
            with db.transaction():
                _run_side(db, statements)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self._close_writer()
            raise StoreUnavailable(self.reason(exc)) from None

    # ─── processes: heartbeats, and the runs of a process that died ─────────────────────

    def housekeeping(self) -> None:
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
            logger.error("run store: heartbeat failed", store=self.where, error=self.reason(exc))
        else:
            if reaped:
                logger.warning("run store: interrupted the runs of a process that stopped", store=self.where, runs=len(reaped))

    def _mark_interrupted(self) -> int:
        """Runs of this host left `running` by a process that is gone become `interrupted`."""
        assert self._write is not None
        rows = self._write.execute(
            "SELECT id, pid FROM runs WHERE status='running' AND host=%s "
            "AND NOT EXISTS (SELECT 1 FROM run_executors AS x WHERE x.run_id = runs.id)", (HOST,)).fetchall()
        dead = [run_id for run_id, pid in rows if pid is None or not is_alive(pid)]
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

    # ─── runs that execute elsewhere (Temporal workers) ─────────────────────────────────

    def adopt_orphans(self, executor: str, limit: int) -> list[tuple[str, str, int]]:
        """See PostgresStore.adopt_orphans."""
        try:
            with self._pool.connection() as db, db.transaction():
                return [tuple(row) for row in db.execute(
                    _ADOPT, (HOST, os.getpid(), executor, PROCESS_TIMEOUT_MS, limit, HOST, os.getpid(),
                             PROCESS_TIMEOUT_MS)).fetchall()]
        except psycopg.Error as exc:
            raise StoreError(f"cannot write to the run store {self.where}: {self.reason(exc)}") from None

    def interrupt(self, run_id: str, message: str) -> bool:
        """See PostgresStore.interrupt."""
        try:
            with self._pool.connection() as db, db.transaction():
                ended = db.execute(_INTERRUPT_ONE, (message, run_id)).rowcount
                if ended:
                    db.execute("UPDATE approvals SET status = 'closed' WHERE status = 'pending' AND run_id = %s", (run_id,))
                    db.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, f"{run_id} end"))
        except psycopg.Error as exc:
            raise StoreError(f"cannot write to the run store {self.where}: {self.reason(exc)}") from None
        return bool(ended)

    # ─── reading, tool settings ─────────────────────────────────────────────────────────

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._pool.connection() as db:
                return db.execute(_pg(sql), params).fetchall()
        except psycopg.Error as exc:  # PoolTimeout is one too
            raise StoreError(f"cannot read the run store {self.where}: {self.reason(exc)}") from None

    def transaction(self, statements: list[Statement]) -> list[int]:
        try:
            with self._pool.connection() as db, db.transaction():
                return [db.execute(_pg(sql), params).rowcount for sql, params in statements]
        except psycopg.Error as exc:
            raise StoreError(f"cannot write to the run store {self.where}: {self.reason(exc)}") from None

    def settings_notice(self, origin: str, name: str) -> list[Statement]:
        return [("SELECT pg_notify(?, ?)", (TOOL_SETTINGS_CHANNEL, f"{origin} {name}"))]

    # ─── closing ────────────────────────────────────────────────────────────────────────

    def _close_writer(self) -> None:
        if self._write is not None:
            with contextlib.suppress(Exception):
                self._write.close()
            self._write = None

    def close(self) -> None:
        """The writer's connection, this process's lease (a clean stop: nobody has to wait for
        its timeout), the pool."""
        self._close_writer()
        with contextlib.suppress(Exception):
            with self._pool.connection() as db:
                db.execute("DELETE FROM processes WHERE id = %s", (self._process,))
        with contextlib.suppress(Exception):
            self._pool.close(timeout=2)


class PostgresStore(Store):
    """The run store in the PostgreSQL database at `url` (postgresql://user[:password]@host:port/db)."""

    database: PostgresDatabase

    def __init__(self, url: str, *, redactor: Redactor | None = None, redacted_events: bool = False):
        database = PostgresDatabase(url)
        self.url = url
        notices = PostgresNotices(url, database.where, database.transaction)
        super().__init__(database, notices, redactor=redactor, redacted_events=redacted_events)

    def __enter__(self) -> "PostgresStore":
        return self

    def record_executor(self, run_id: str, executor: str) -> None:
        """`run_id` executes on `executor`'s workers, not in this process: if this process dies,
        the run is not interrupted but adopted (written by the writer thread, before the run's events)."""
        self.writer.add_side(("INSERT INTO run_executors (run_id, executor) VALUES (?, ?) ON CONFLICT DO NOTHING",
                              (run_id, executor)))

    def executor(self, run_id: str) -> str | None:
        """Where `run_id` executes when not in the process that wrote its row (`temporal`), else None."""
        return self.reads.executor(run_id)

    def adopt_orphans(self, executor: str, limit: int = 20) -> list[tuple[str, str, int]]:
        """Take over runs of `executor` whose process stopped (no heartbeat for PROCESS_TIMEOUT_MS):
        their rows now name this process. Only while this process's own heartbeat is fresh (else
        others would take them back at once). [(run_id, kind, started_at)]; StoreError when unreachable."""
        return self.database.adopt_orphans(executor, limit)

    def interrupt(self, run_id: str, message: str) -> bool:
        """End a running run as `interrupted` (an adopted run whose execution is gone); wakes its followers."""
        return self.database.interrupt(run_id, message)


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
