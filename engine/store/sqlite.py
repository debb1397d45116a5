"""The embedded run store: SQLite in WAL mode, written off the hot path (writer.py says how).

A batch's ready rows go in through multi-row statements, one transaction per batch; the WAL
is copied back into the file by a thread of its own (`Checkpoints`), never in a commit that
answers wait for. Many processes may share one database file (WAL + busy timeout). A run that was `running` when its process died is marked
`interrupted` the next time the store opens, or within PROCESS_TIMEOUT_MS by a process that
has it open (the heartbeat in `processes`: a killed process not yet reaped keeps its pid, not
its heartbeat). The file and its -wal/-shm are readable by their
owner only (0600): they hold inputs and outputs of every run. Notifications (`listen`,
`notify`) reach this process only; tool settings changed by another process are noticed by
polling the table every SETTINGS_POLL_S while someone listens for them (`SettingsPoll`).

`SqliteDatabase` is the dialect (database.py's interface); `RunStore` the Store over it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
from itertools import chain, groupby
from operator import itemgetter
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..logging import logger
from ..safety.redaction import Redactor
from .base import Store
from .database import (
    HEARTBEAT_S,
    HOST,
    PROCESS_FORGOTTEN_MS,
    PROCESS_TIMEOUT_MS,
    Database,
    Statement,
    event_dict,
    is_alive,
    select_events,
    stored_events,
)
from .errors import StoreError, StoreUnavailable
from .notices import LocalNotices
from .packing import HOLD_BACK_MS, pack_run, unpacked, with_packs
from .rows import EVENT_WIDTH, RUN_START, WIDTHS, Batch
from .schema import (
    INSERT_EVENT,
    MIGRATIONS,
    SQLITE,
    SQLITE_BULK,
    SQLITE_RUN_START,
    TOOL_SETTINGS_CHANNEL,
    SchemaTooNew,
    implied_statements,
    migrate,
)

BUSY_TIMEOUT_MS = 10_000
WRITE_ATTEMPTS = 4  # a batch that fails with a transient error (database locked…) is retried, in order
FILE_MODE = 0o600  # runs.db, -wal, -shm: the inputs and outputs of every run, for the owner only
SETTINGS_POLL_S = 0.5  # how often another process's tool-settings change is looked for
CHECKPOINT_ROWS = 2_000  # rows written between two checkpoints (Checkpoints): a few MiB of WAL
CHECKPOINT_S = 1.0  # … or this long after a change
WRITER_CACHE_KIB = 65_536  # the writer's page cache, at most (SQLite's default: 2 MiB)
WRITER_MMAP_BYTES = 256 << 20  # the writer reads the file through a mapping up to this size
IMPLIED = implied_statements(SQLITE)
MAX_STATEMENT_ROWS = 256  # rows per INSERT statement (fewer if the SQLite build takes fewer parameters)
EXACT_ROWS = 16  # up to this many rows, an INSERT of exactly that many (the few rows of a small batch: one statement)
CACHED_STATEMENTS = 256  # the writer's prepared statements (sqlite3's default, 128, is fewer than the INSERTs of all sizes)
_HEARTBEAT = ("INSERT INTO processes (id, host, pid, heartbeat_at) VALUES (?, ?, ?, ?) "
              "ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at")


# The implied statements that take several rows at once (all but the rare tool_log_lookup); a
# run's row brings its packed events (packing.py), one value more
BULK = {**{name: IMPLIED[name] for name in ("tool_log", "exchange")}, RUN_START: SQLITE_RUN_START, **SQLITE_BULK}
_WIDTHS = {**WIDTHS, RUN_START: WIDTHS[RUN_START] + 1}


# Python's sqlite3 binds str, int and float directly, but "adapts" any other value first (bytes,
# None): a registry lookup and two failed attribute lookups whose AttributeError is formatted and
# dropped, several times the cost of binding the value (about 40 % of the writer's Python work
# per call, by callgrind). So the writer binds neither: an event's data (the bytes the Run
# encoded, see Database.DATA_BYTES) is decoded on the writer's thread, and None is bound as a NaN,
# which SQLite stores as NULL (sqlite3_bind_double: a NaN is a NULL), the same value.
_STATEMENT, _PARAMS = itemgetter(0), itemgetter(1)  # of a side write (Writer.add_side)
_NULL = float("nan")
_DECODE = bytes.decode


@functools.lru_cache(maxsize=CACHED_STATEMENTS)
def _insert_rows(sql: str, size: int) -> str:
    """An `INSERT … VALUES (?, …) [tail]` statement for `size` rows at once."""
    head, rest = sql.split("VALUES (", 1)
    depth, end = 1, 0
    while depth:  # the group's own closing parenthesis (it may hold a CAST(…))
        depth += {"(": 1, ")": -1}.get(rest[end], 0)
        end += 1
    group, tail = rest[: end - 1], rest[end:]
    return f"{head}VALUES {', '.join([f'({group})'] * size)}{tail}"


def _bindable_events(events: Sequence[Any]) -> list[Any]:
    """Event rows' values as sqlite3 binds them without adapting (see _NULL): the data as text,
    None (a row without a call, step or skill) as the NaN. Per column, not per row."""
    values = list(events)
    data = values[EVENT_WIDTH - 1 :: EVENT_WIDTH]
    try:
        values[EVENT_WIDTH - 1 :: EVENT_WIDTH] = map(_DECODE, data)
    except TypeError:  # some rows hold text already (made one by one)
        values[EVENT_WIDTH - 1 :: EVENT_WIDTH] = [_DECODE(v) if isinstance(v, bytes) else v for v in data]
    for column in (4, 5, 6):  # tool_call_id, step_id, skill: the columns that may be NULL
        part = values[column::EVENT_WIDTH]
        if None in part:  # (a C loop; tool_call_id is seldom None)
            values[column::EVENT_WIDTH] = [_NULL if value is None else value for value in part]
    return values


def _bindable(values: Sequence[Any]) -> list[Any]:
    """Values with None as the NaN (see _NULL). Not a dict's `get`: that hashes every value,
    and a run's output and packed events are long new strings (siphash over each byte)."""
    return [_NULL if value is None else value for value in values]


def connect(path: Path) -> sqlite3.Connection:
    """The writer's connection; the file (made if new) and its -wal/-shm get FILE_MODE."""
    own_file(path)
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False,
                                 cached_statements=CACHED_STATEMENTS)
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _set_wal(connection)
        connection.execute("PRAGMA synchronous = NORMAL")
        for suffix in ("-wal", "-shm"):  # SQLite makes them with the file's mode; older ones may be wider
            own_file(path.with_name(path.name + suffix), create=False)
    except BaseException:
        connection.close()
        raise
    return connection


def _set_wal(connection: sqlite3.Connection) -> None:
    """WAL mode. Switching a new file's journal mode takes a lock that SQLite's busy timeout
    does not wait for: processes opening a new store at once got "database is locked" (about
    1 in 40 races of 6 openers): wait for it here, up to the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def own_file(path: Path, *, create: bool = True) -> None:
    """Make `path` (0600 whatever the umask) or narrow an existing one to 0600 when it is ours."""
    if create:
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
        except FileExistsError:
            pass
        except OSError:
            return  # no such directory, not writable…: SQLite's own open says so, where it is handled
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    if info.st_mode & 0o777 != FILE_MODE and info.st_uid == os.getuid():
        os.chmod(path, FILE_MODE)  # a new file under an odd umask, or one made by an older skillyard


class SqliteDatabase(Database):
    """The SQLite database at `path` (made, with its directory, if new), as a Store's parts use it."""

    EVENT_ROWS = "event_rows"  # `events` is a view over it and the runs' packed events (packing.py)
    DATA_BYTES = True  # an event's encoded data is decoded by the writer (_bindable_events), off the event loop
    HOLD_BACK_MS = HOLD_BACK_MS  # a run is kept for its end this long, to be packed whole

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self._write: sqlite3.Connection | None = None  # the writer thread's (and, opening, this thread's)
        self._lease: str | None = None  # this process's row in `processes`, once the writer wrote it
        self._beat_failed = False  # the last heartbeat failed (logged once, not every HEARTBEAT_S)
        self._next_heartbeat = 0.0
        self._checkpoints = Checkpoints(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write = connect(self.path)
            self.schema_version = migrate(self._write)
            # The events B-tree's keys start with a random run id, so each run's rows land on
            # another page: pages found in the cache or mapped are not read through a system
            # call each time. Memory is taken as pages are used. (Set once the file is set up:
            # on a new file that other processes open at the same moment, it could meet a lock.)
            self._write.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
            self._write.execute(f"PRAGMA mmap_size = {WRITER_MMAP_BYTES}")
            self.interrupted = self._mark_interrupted()
        except SchemaTooNew as exc:
            self.close()
            raise StoreError(
                f"the run store {self.path} was written by a newer skillyard (schema version {exc.version}; this one "
                f"knows up to {len(MIGRATIONS)}): upgrade skillyard, point store.path in config/engine.yaml at "
                "another file, or run with --no-store"
            ) from None
        except (sqlite3.Error, OSError) as exc:
            self.close()
            raise StoreError(
                f"cannot open the run store {self.path}: {exc} — check that the directory is writable and the file "
                "is a skillyard store (move it away to start a new one), or run with --no-store"
            ) from None
        self._max_parameters = self._write.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)  # 999 before SQLite 3.32
        self._write.execute("PRAGMA wal_autocheckpoint = 0")  # the thread of Checkpoints does them

    def close(self) -> None:
        if self._write is not None:
            self._checkpoints.close()
            with contextlib.suppress(sqlite3.Error):
                if self._lease is not None:  # a clean stop: nobody need wait for this process's timeout
                    self._write.execute("DELETE FROM processes WHERE id = ?", (self._lease,))
                self._write.close()
            self._write = None

    pack_run = staticmethod(pack_run)  # a whole run's events in its row (packing.py)

    # ─── writing (the writer thread) ────────────────────────────────────────────────────

    def write_side(self, statements: list[Statement]) -> None:
        """One short transaction; a statement's run of rows in one call (an owner per call).
        Locked past the busy timeout (or another transient error): StoreUnavailable, kept."""
        db = self._write
        if db is None:  # closed
            return
        try:
            with db:
                db.execute("BEGIN IMMEDIATE")
                self._side(db, statements)
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(str(exc)) from None

    def write_rows(self, rows: Batch, side: Sequence[Statement] = ()) -> list[tuple[str, BaseException]]:
        """One transaction: the side writes, the events, then the rows they imply, all as plain
        values (no JSON for SQLite to parse). A run that starts and ends in the batch gets its
        events packed into its row (packing.py); the others' events go in through multi-row
        INSERTs: each statement lets go of the GIL once and must win it back from a busy event
        loop, so few big ones beat executemany's one per row; so do the implied rows
        (schema.SQLITE_BULK ends runs). A commit is the dearest step of a small batch (the WAL's
        pages): the side writes share the events' one."""
        db = self._write
        assert db is not None
        events, implied = self._packed(rows)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    if side:
                        self._side(db, side)
                    if events:
                        self._insert_many(db, INSERT_EVENT, _bindable_events(events), EVENT_WIDTH)
                    for name, values in implied:
                        width = _WIDTHS[name]
                        values = _bindable(values)  # a new list for each attempt
                        bulk = BULK.get(name)
                        if bulk is not None:
                            self._insert_many(db, bulk, values, width)
                        else:
                            db.executemany(IMPLIED[name], (values[at : at + width] for at in range(0, len(values), width)))
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
                self._checkpoints.wrote(db.total_changes)
                return []
            except sqlite3.OperationalError:  # locked beyond the busy timeout, disk I/O: again, same order
                if attempt == WRITE_ATTEMPTS:
                    raise
                time.sleep(0.05 * 4**attempt)
        return []  # (not reached: the last attempt returns or raises)

    def _side(self, db: sqlite3.Connection, statements: Sequence[Statement]) -> None:
        """Side writes (Writer.add_side), in order, in the transaction under way; a statement's
        run of rows (an owner per call) in one multi-row statement: executemany's step per row
        lets go of the GIL each time, and wins it back from the busy event loop each time."""
        for sql, group in groupby(statements, key=_STATEMENT):
            rows = list(map(_PARAMS, group))
            self._insert_many(db, sql, list(chain.from_iterable(rows)), len(rows[0]))

    @staticmethod
    def _packed(rows: Batch) -> tuple[Sequence[Any], list[tuple[str, Sequence[Any]]]]:
        """The batch's event rows, and its implied rows by statement, the runs' rows with their
        packed events (packing.py; None for a run not packed)."""
        implied = rows.implied_flat()
        for at, (name, values) in enumerate(implied):
            if name == RUN_START:
                implied[at] = (name, with_packs(values, rows.packs))
        return rows.events, implied

    def _insert_many(self, db: sqlite3.Connection, sql: str, values: list[Any], width: int) -> None:
        """Rows of `width` values each, in statements of several rows (sizes: powers of two,
        each statement prepared once, the module caches them): a handful per batch; up to
        EXACT_ROWS rows (the batches of answers that wait for their commit), one statement."""
        count, done = len(values) // width, 0
        if count <= EXACT_ROWS and count * width <= self._max_parameters:
            db.execute(_insert_rows(sql, count), values)
            return
        size = 1 << (min(MAX_STATEMENT_ROWS, self._max_parameters // width).bit_length() - 1)
        while done < count:
            while count - done < size:
                size //= 2
            db.execute(_insert_rows(sql, size), values[done * width : (done + size) * width])
            done += size

    # ─── leases: the heartbeat, and the runs of a process that is gone ──────────────────

    def housekeeping(self) -> None:
        """Every HEARTBEAT_S (writer thread): say this process is alive, and interrupt the runs of
        processes that are gone, so a long-lived process (a service restarted a second after a
        crash) ends the runs of one that died while it had the store open."""
        now = time.monotonic()
        if now < self._next_heartbeat or self._write is None:
            return
        self._next_heartbeat = now + HEARTBEAT_S
        db, pid = self._write, os.getpid()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                now_ms = int(time.time() * 1000)
                db.execute(_HEARTBEAT, (f"{HOST}:{pid}", HOST, pid, now_ms))
                reaped = self._mark_interrupted()
                db.execute("DELETE FROM processes WHERE heartbeat_at < ?", (now_ms - PROCESS_FORGOTTEN_MS,))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            if not self._beat_failed:
                logger.error("run store: heartbeat failed", store=self.where, error=str(exc))
            self._beat_failed = True
            return
        self._lease, self._beat_failed = f"{HOST}:{pid}", False
        if reaped:
            logger.warning("run store: interrupted the runs of a process that stopped", store=self.where, runs=reaped)

    def _mark_interrupted(self) -> int:
        """Runs left `running` by a process that is gone (same host) become `interrupted`.

        Gone: its pid no longer exists, or its heartbeat is older than PROCESS_TIMEOUT_MS — a
        process killed but not yet reaped by its parent (a zombie) still has its pid. A process
        with no heartbeat row (it closed its store, or an older skillyard) is judged by its pid.
        Their finish time is their last recorded event (or now, if none was recorded).
        """
        assert self._write is not None
        rows = self._write.execute(
            "SELECT r.id, r.pid, p.heartbeat_at FROM runs AS r LEFT JOIN processes AS p ON p.id = r.host || ':' || r.pid "
            "WHERE r.status='running' AND r.host=?", (HOST,)).fetchall()
        now = int(time.time() * 1000)
        me, stale = os.getpid(), now - PROCESS_TIMEOUT_MS
        alive = {pid: is_alive(pid) for pid in {row[1] for row in rows} if pid is not None}
        dead = [run_id for run_id, pid, beat in rows
                if pid is None or not alive[pid] or (pid != me and beat is not None and beat < stale)]
        if dead:
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

    def events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        """As Database's: the run's packed events (if its row has them) and then its event rows,
        read in one transaction (packed events are a run's first: the rows come after)."""
        with self._read() as db:
            db.execute("BEGIN")
            packed = db.execute("SELECT packed_events FROM runs WHERE id = ?", (run_id,)).fetchone()
            rows = db.execute(_SELECT_EVENT_ROWS, (run_id, after_seq)).fetchall()
            db.execute("COMMIT")
        out = [event_dict(*row) for row in unpacked(run_id, packed[0], after_seq)] if packed and packed[0] else []
        return out + stored_events(rows)

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._read() as db:
            return db.execute(sql, params).fetchall()

    def transaction(self, statements: list[Statement]) -> list[int]:
        with self._read() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                counts = [db.execute(sql, params).rowcount for sql, params in statements]
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return counts


class Checkpoints:
    """Copies the WAL back into the database file (a checkpoint) on a thread of its own.

    SQLite checkpoints on the connection that commits, once the WAL passes 1,000 pages, and a
    checkpoint syncs the files to disk (with `synchronous = NORMAL` nothing else does): a commit
    now and then waited for the disk, and every answer waiting for that commit with it
    (`store.durability: committed`: bench.service at 10 connections, at once, 0.50 of the empty
    app with SQLite's checkpoints, 0.59 without). The writer's connection does not checkpoint
    (`wal_autocheckpoint = 0`); it tells this thread how many rows it has changed, and every
    CHECKPOINT_ROWS rows, CHECKPOINT_S after a change, and at close, the thread checkpoints,
    PASSIVE: the writer goes on appending meanwhile, never waiting for it. (A checkpoint copies
    the whole WAL, other processes' commits too.)"""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._due = threading.Event()
        self._changes = 0  # rows the writer changed so far (its connection's total_changes)
        self._checkpointed = 0  # … up to the last checkpoint begun
        self._stop = False
        self._thread: threading.Thread | None = None
        self._failed = False  # logged once, not every checkpoint

    def wrote(self, changes: int) -> None:
        """The writer committed (its thread): `changes` rows changed since its connection opened."""
        self._changes = changes
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="skillyard-store-checkpoint", daemon=True)
            self._thread.start()
        if changes - self._checkpointed >= CHECKPOINT_ROWS and not self._due.is_set():
            self._due.set()

    def close(self) -> None:
        """Checkpoint what this process wrote since the last one, and stop the thread."""
        self._stop = True
        self._due.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while True:
                self._due.wait(CHECKPOINT_S)
                stop = self._stop
                if self._changes != self._checkpointed:
                    begun = self._checkpointed = self._changes
                    self._due.clear()
                    connection, whole = self._checkpoint(connection)
                    if not whole and self._checkpointed == begun:  # a reader held part back: again next tick
                        self._checkpointed = -1
                if stop:
                    return
        finally:
            if connection is not None:
                connection.close()

    def _checkpoint(self, connection: sqlite3.Connection | None) -> tuple[sqlite3.Connection | None, bool]:
        """One PASSIVE checkpoint through the thread's connection (made if None): the
        connection to use next time (None after a failure: a new one then), and whether the
        whole WAL was copied (a PASSIVE checkpoint stops at frames a reader still needs)."""
        try:
            connection = connection or sqlite3.connect(self._path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            busy, frames, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self._failed = False
            return connection, not busy and copied >= frames
        except sqlite3.Error as exc:  # tried again after the next change: the WAL only grows meanwhile
            if not self._failed:
                logger.warning("run store: checkpoint failed", store=str(self._path), error=str(exc))
            self._failed = True
            if connection is not None:
                connection.close()
            return None, False


class SettingsPoll:
    """Tool settings changed by another process: SQLite has no push between processes, so a
    thread polls the table's count and newest change every SETTINGS_POLL_S (only once someone
    listens) and tells the store's notices."""

    def __init__(self, database: SqliteDatabase, notices: LocalNotices) -> None:
        self._database = database
        self._notices = notices
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._seen: tuple[Any, ...] | None = None
        self._stop = False

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._seen = self._mark()  # now: a change from here on is heard
                self._thread = threading.Thread(target=self._poll, name="skillyard-store-settings", daemon=True)
                self._thread.start()

    def seen(self) -> None:
        if self._thread is not None:  # (not watching yet: start() reads the table then)
            self._seen = self._mark()  # our own change: nobody else needs telling

    def close(self) -> None:
        self._stop = True

    def _mark(self, connection: sqlite3.Connection | None = None) -> tuple[Any, ...] | None:
        """The settings table's count and newest change (None if it cannot be read), through
        `connection` (the poller's own) or a short-lived one."""
        with contextlib.suppress(StoreError, sqlite3.Error):
            if connection is not None:
                return tuple(connection.execute(_SETTINGS_MARK).fetchone())
            return tuple(self._database.fetch(_SETTINGS_MARK)[0])
        return None

    def _poll(self) -> None:
        """The poller keeps one connection: opening one reads and parses the whole schema
        (about 300,000 instructions, twice a second for as long as the store is open)."""
        connection: sqlite3.Connection | None = None
        try:
            while not self._stop:
                time.sleep(SETTINGS_POLL_S)
                if connection is None:
                    with contextlib.suppress(sqlite3.Error):
                        connection = sqlite3.connect(self._database.path, timeout=BUSY_TIMEOUT_MS / 1000,
                                                     isolation_level=None)
                mark = self._mark(connection)
                if mark is None and connection is not None:  # a broken connection: a new one next time
                    connection.close()
                    connection = None
                if mark is not None and mark != self._seen:
                    self._seen = mark
                    self._notices.deliver(TOOL_SETTINGS_CHANNEL, ["another-process"])
        finally:
            if connection is not None:
                connection.close()


class RunStore(Store):
    """The SQLite run store at `path` (made, with its directory, if new)."""

    def __init__(self, path: str | Path, *, redactor: Redactor | None = None, redacted_events: bool = False):
        """`redacted_events=True`: the events fed to `listener` arrive already redacted (an
        Engine's own runs), so the store does not redact them a second time."""
        database = SqliteDatabase(path)
        self.path = database.path
        notices = LocalNotices()
        super().__init__(database, notices, redactor=redactor, redacted_events=redacted_events,
                         settings_watch=SettingsPoll(database, notices))

    def __enter__(self) -> "RunStore":
        return self


_SELECT_EVENT_ROWS = select_events("event_rows")
_SETTINGS_MARK = "SELECT count(*), max(updated_at), total(updated_at) FROM tool_settings"
