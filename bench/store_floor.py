"""The floor under the SQLite store's CPU: raw sqlite3 inserting the same event rows in a loop.

bench.store measures what the store costs per call; this says how much of it SQLite itself
takes at the very least, on this machine, in the same run: the event rows the store wrote
(read back from its file, in arrival order) go into a fresh file through multi-row `INSERT`s
of ROWS_PER_STATEMENT rows (cheaper than `executemany`'s one per row: ~25 % less CPU here),
STATEMENT_EVENTS rows per transaction, with the writer's
pragmas (WAL, synchronous=NORMAL, its cache and mapping), on this thread alone — no
listener, no implied rows, no other thread. The tables:

* `schema`: the `events` table as the schema has it (a rowid table: rows appended, found
  through the index of (run_id, seq): migration 9);
* `keyed`: as it was before (WITHOUT ROWID, key (run_id, seq): each run's rows go into a
  random page of the table itself);
* `time-ordered`: the same, each run id given a time-ordered prefix (a new run's rows then
  go to the B-tree's right edge instead of a random page);
* `rowid`: a plain rowid table with no key at all: appending rows, nothing more;
* `packed`: one row per run (keyed by its id), its events as one JSON text — how the store
  keeps a run that starts and ends within one batch (engine/store/packing.py; the JSON is
  built before the clock runs).
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from itertools import chain
from pathlib import Path
from typing import Iterator

import orjson

from engine.store.schema import MIGRATIONS
from engine.store.sqlite import WRITER_CACHE_KIB, WRITER_MMAP_BYTES
from engine.store.writer import STATEMENT_EVENTS

_COLUMNS = "run_id, seq, type, ts, tool_call_id, step_id, skill, data"
_KEYED = MIGRATIONS[0].split("CREATE TABLE events", 1)[1].split(";", 1)[0]  # the first schema's definition
_SCHEMA = MIGRATIONS[8].split("CREATE TABLE events_appended", 1)[1].split(";", 1)[0]  # today's
_ROWID = ("(run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, ts INTEGER NOT NULL, tool_call_id TEXT, "
          "step_id TEXT, skill TEXT, data TEXT NOT NULL)")
# one row per run and batch (a run that spans two batches has two), its events as one JSON text
_PACKED = "(run_id TEXT NOT NULL, part INTEGER NOT NULL, events TEXT NOT NULL, PRIMARY KEY (run_id, part))"
TABLES = {"schema": _SCHEMA, "keyed": _KEYED, "time-ordered": _KEYED, "rowid": _ROWID, "packed": _PACKED}
ROWS_PER_STATEMENT = 256


def _statements(width: int) -> tuple[str, str]:
    """The one-row and the ROWS_PER_STATEMENT-row INSERT into `events` of rows of `width` values."""
    columns = _COLUMNS if width == 8 else "run_id, part, events"
    group = f"({', '.join('?' * width)})"
    return f"INSERT INTO events ({columns}) VALUES {group}", f"INSERT INTO events ({columns}) VALUES " + ", ".join(
        [group] * ROWS_PER_STATEMENT)


def _batches(source: Path, time_ordered: bool) -> Iterator[list[tuple[object, ...]]]:
    """The store's event rows in arrival order, STATEMENT_EVENTS at a time."""
    db = sqlite3.connect(source)
    try:
        cursor = db.execute(f"SELECT {_COLUMNS} FROM events ORDER BY ts, run_id, seq")
        order: dict[str, str] = {}
        while rows := cursor.fetchmany(STATEMENT_EVENTS):
            if time_ordered:  # same length: an arrival counter replaces the id's first 11 hex digits
                rows = [(order.setdefault(row[0], f"run_{len(order):011x}{row[0][15:]}"), *row[1:]) for row in rows]
            yield rows
    finally:
        db.close()


def _packed_batches(source: Path) -> Iterator[list[tuple[object, ...]]]:
    """Each batch's events as one row per run: (run_id, the batch's number, its events as the
    JSON array SQLite's store packs, engine/store/packing.py)."""
    for part, rows in enumerate(_batches(source, False)):
        runs: dict[str, list[tuple[object, ...]]] = {}
        for run_id, *event, data in rows:
            runs.setdefault(run_id, []).append((*event, orjson.Fragment(data)))
        yield [(run_id, part, orjson.dumps(events).decode()) for run_id, events in runs.items()]


def _insert(source: Path, table: str, target: Path) -> float:
    """This thread's CPU seconds to insert the rows of `source` into a new `table` at `target`."""
    db = sqlite3.connect(target, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
        db.execute(f"PRAGMA mmap_size = {WRITER_MMAP_BYTES}")
        db.execute(f"CREATE TABLE events {TABLES[table]}")
        spent = 0.0
        batches = _packed_batches(source) if table == "packed" else _batches(source, table == "time-ordered")
        for rows in batches:
            one, many = _statements(len(rows[0]))
            whole = len(rows) // ROWS_PER_STATEMENT * ROWS_PER_STATEMENT
            values = [list(chain.from_iterable(rows[at : at + ROWS_PER_STATEMENT])) for at in range(0, whole, ROWS_PER_STATEMENT)]
            started = time.thread_time()  # reading the source and flattening its rows are not counted
            db.execute("BEGIN IMMEDIATE")
            for part in values:
                db.execute(many, part)
            db.executemany(one, rows[whole:])
            db.execute("COMMIT")
            spent += time.thread_time() - started
        return spent
    finally:
        db.close()


def floor(source: Path, calls: int) -> dict[str, float]:
    """µs of CPU per call for each of TABLES, `calls` being how many calls wrote `source`'s events."""
    with tempfile.TemporaryDirectory(prefix="skillyard-bench-floor-") as work:
        return {table: _insert(source, table, Path(work) / f"{table}.db") / calls * 1e6 for table in TABLES}
