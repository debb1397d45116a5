"""The run store's schema, as numbered migrations applied on open, and the writer's statements.

One definition, two dialects: the migrations are written for SQLite and rendered for
PostgreSQL by `postgres_ddl` (64-bit integers, identity keys, no WITHOUT ROWID; SQLITE_ONLY ones are none). The
writer's statements take ready values (store/rows.py computes them): one definition with `?`
placeholders (`Dialect` renders the few places that read stored JSON or compare NULLs), plus
the bulk forms each database takes best — PostgreSQL one JSON array per statement
(POSTGRES_BULK, INSERT_EVENTS_PG), SQLite multi-row statements (SQLITE_BULK ends runs).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from ..errors import SkillyardError

SQLITE_ONLY = "-- sqlite only"  # a migration that starts so is none for PostgreSQL (postgres_ddl)

MIGRATIONS: list[str] = [
    # 1: runs, their events, tool execution logs, model exchanges for replay
    """
    CREATE TABLE runs (
        id            TEXT PRIMARY KEY,
        kind          TEXT NOT NULL,            -- tool | agent
        name          TEXT NOT NULL,            -- the tool, or the agent's model
        status        TEXT NOT NULL,            -- running | ok | error | cancelled | interrupted
        started_at    INTEGER NOT NULL,         -- ms since the epoch
        finished_at   INTEGER,
        input         TEXT,                     -- JSON, redacted
        output        TEXT,                     -- JSON, redacted
        error         TEXT,                     -- JSON {code, message, details}
        usage         TEXT,                     -- JSON {input_tokens, output_tokens}
        parent_run_id TEXT,
        pid           INTEGER,
        host          TEXT
    );
    CREATE INDEX runs_started ON runs(started_at);
    CREATE INDEX runs_name ON runs(name);
    CREATE INDEX runs_status ON runs(status);

    CREATE TABLE events (
        run_id       TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        type         TEXT NOT NULL,
        ts           INTEGER NOT NULL,
        tool_call_id TEXT,
        step_id      TEXT,
        skill        TEXT,
        data         TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;

    CREATE TABLE tool_logs (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id        TEXT NOT NULL,
        tool_call_id  TEXT NOT NULL,
        tool          TEXT NOT NULL,
        input         TEXT,
        output        TEXT,                     -- truncated to 10,000 characters
        status        TEXT NOT NULL,            -- success | error | timeout
        error_message TEXT,
        duration_ms   REAL,
        created_at    INTEGER NOT NULL
    );
    CREATE INDEX tool_logs_tool ON tool_logs(tool);
    CREATE INDEX tool_logs_created ON tool_logs(created_at);

    CREATE TABLE model_exchanges (
        run_id       TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        tool_call_id TEXT,
        step_id      TEXT,
        skill        TEXT,
        model        TEXT,
        attempt      INTEGER,
        messages     TEXT NOT NULL,
        response     TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    """,
    # 2: tool settings layered over the YAML (what the admin API and `skillyard tools` change)
    """
    CREATE TABLE tool_settings (
        name        TEXT PRIMARY KEY,
        type        TEXT,                       -- set for tools created in the store
        description TEXT,
        enabled     INTEGER,                    -- NULL: keep the YAML value
        config      TEXT,                       -- JSON overrides / the instance's config
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
    );
    """,
    # 3: pruning and per-run lookups of tool logs without a full scan
    """
    CREATE INDEX IF NOT EXISTS tool_logs_run ON tool_logs(run_id);
    """,
    # 4: who started a run (the API key name of the service's caller), so a caller sees its own runs only
    """
    CREATE TABLE IF NOT EXISTS run_owners (
        run_id    TEXT PRIMARY KEY,
        principal TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS run_owners_principal ON run_owners(principal);
    """,
    # 5: approvals waiting for an answer (any replica may answer), and the processes that write
    # to a shared store with their heartbeat (a survivor interrupts the runs of a dead one)
    """
    CREATE TABLE IF NOT EXISTS approvals (
        run_id       TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        status       TEXT NOT NULL,             -- pending | closed
        updated_at   INTEGER NOT NULL,
        PRIMARY KEY (run_id, tool_call_id)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS processes (
        id           TEXT PRIMARY KEY,          -- host:pid
        host         TEXT NOT NULL,
        pid          INTEGER NOT NULL,
        heartbeat_at INTEGER NOT NULL           -- ms since the epoch, the database's clock
    );
    """,
    # 6: runs that execute elsewhere than in the process that wrote their row (Temporal workers):
    # a dead writer does not make them interrupted; a live process sharing the store adopts them
    """
    CREATE TABLE IF NOT EXISTS run_executors (
        run_id   TEXT PRIMARY KEY,
        executor TEXT NOT NULL                  -- temporal
    ) WITHOUT ROWID;
    """,
    # 7: batches (`skillyard batch`): one row per batch, and the run of each of its cases
    """
    CREATE TABLE IF NOT EXISTS batches (
        id          TEXT PRIMARY KEY,
        tool        TEXT NOT NULL,
        principal   TEXT,
        status      TEXT NOT NULL,              -- running | done | interrupted
        started_at  INTEGER NOT NULL,
        finished_at INTEGER,
        total       INTEGER NOT NULL,           -- cases in the dataset (after --filter/--limit)
        data_file   TEXT
    );
    CREATE TABLE IF NOT EXISTS batch_cases (
        batch_id TEXT NOT NULL,
        case_id  TEXT NOT NULL,
        run_id   TEXT NOT NULL,
        ok       INTEGER NOT NULL,
        passed   INTEGER NOT NULL,              -- every expectation held
        PRIMARY KEY (batch_id, case_id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS batch_cases_run ON batch_cases(run_id);
    """,
    # 8: each case's expectation verdicts (JSON [{check, path?, ok, message, score?}], redacted), for the page
    """
    ALTER TABLE batch_cases ADD COLUMN verdicts TEXT
    """,
    # 9: events in a rowid table, found by the index of its key (run_id, seq). As the table's
    # own key (WITHOUT ROWID), whose ids are random, each run's rows went into a page of their
    # own: most splitting it, every commit and checkpoint writing as many pages as runs (the
    # largest part of the writer's CPU). Now a run's rows are appended, and only the index's
    # short entries land on random pages. The same rows, the same reads. SQLite only: a
    # PostgreSQL table is already a heap beside its key's index.
    f"""{SQLITE_ONLY}
    CREATE TABLE events_appended (
        run_id       TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        type         TEXT NOT NULL,
        ts           INTEGER NOT NULL,
        tool_call_id TEXT,
        step_id      TEXT,
        skill        TEXT,
        data         TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    INSERT INTO events_appended (run_id, seq, type, ts, tool_call_id, step_id, skill, data)
        SELECT run_id, seq, type, ts, tool_call_id, step_id, skill, data FROM events ORDER BY run_id, seq;
    DROP TABLE events;
    ALTER TABLE events_appended RENAME TO events
    """,
    # 10: no query reads tool logs by created_at (they are listed by id, the same order): its
    # index was one more B-tree insert per tool call for nothing
    """
    DROP INDEX IF EXISTS tool_logs_created
    """,
    # 11: a run the store gets whole (most tool calls: Store.open_buffer, take_run) keeps
    # its events in its own row, as one JSON array (packing.py): one value written instead of
    # some 15 rows and their index entries, most of what SQLite did per call. The event rows
    # of the other runs go on in `event_rows`, and the view `events` shows both as rows, the
    # same columns as before, so SQL reads every event as it did. SQLite only: PostgreSQL's
    # writer sends a batch in one statement anyway.
    f"""{SQLITE_ONLY}
    ALTER TABLE events RENAME TO event_rows;
    ALTER TABLE runs ADD COLUMN packed_events TEXT;
    CREATE VIEW events (run_id, seq, type, ts, tool_call_id, step_id, skill, data) AS
        SELECT run_id, seq, type, ts, tool_call_id, step_id, skill, data FROM event_rows
        UNION ALL
        SELECT r.id, json_extract(p.value, '$[0]'), json_extract(p.value, '$[1]'), json_extract(p.value, '$[2]'),
               json_extract(p.value, '$[3]'), json_extract(p.value, '$[4]'), json_extract(p.value, '$[5]'),
               json_quote(json_extract(p.value, '$[6]'))
        FROM runs AS r, json_each(r.packed_events) AS p WHERE r.packed_events IS NOT NULL
    """,
    # 12: tools edited on the page: a display title, a sort position ("order" is
    # SQL's), the parameters' JSON Schema, confirm, and whether `config` replaces the YAML's whole
    """
    ALTER TABLE tool_settings ADD COLUMN title TEXT;
    ALTER TABLE tool_settings ADD COLUMN position INTEGER;
    ALTER TABLE tool_settings ADD COLUMN parameters TEXT;
    ALTER TABLE tool_settings ADD COLUMN confirm INTEGER;
    ALTER TABLE tool_settings ADD COLUMN config_whole INTEGER NOT NULL DEFAULT 0
    """,
    # 13: sessions: a named conversation and its messages in the OpenAI chat format
    # (redacted), each row linked to the run of its turn; `busy_run` is the turn holding it
    # (until `busy_until`, ms), so two turns of one session never interleave (store/sessions.py)
    """
    CREATE TABLE IF NOT EXISTS sessions (
        id            TEXT PRIMARY KEY,
        principal     TEXT,                     -- the API key name that created it (NULL: the project's own use)
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        turns         INTEGER NOT NULL,
        input_tokens  INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        busy_run      TEXT,
        busy_until    INTEGER
    );
    CREATE INDEX IF NOT EXISTS sessions_updated ON sessions(updated_at);
    CREATE TABLE IF NOT EXISTS session_messages (
        session_id TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        turn       INTEGER NOT NULL,
        run_id     TEXT NOT NULL,
        message    TEXT NOT NULL,               -- JSON, one OpenAI chat message
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID
    """,
    # 14: a session's name is its owner's: two callers naming `ticket-1` have two sessions. The
    # key becomes (principal, id), '' the project's own use (a key column is never NULL in
    # PostgreSQL); both tables are rebuilt, their rows kept
    """
    CREATE TABLE sessions_owned (
        principal     TEXT NOT NULL,            -- the API key name that created it ('': the project's own use)
        id            TEXT NOT NULL,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        turns         INTEGER NOT NULL,
        input_tokens  INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        busy_run      TEXT,
        busy_until    INTEGER,
        PRIMARY KEY (principal, id)
    );
    INSERT INTO sessions_owned SELECT COALESCE(principal, ''), id, created_at, updated_at, turns, input_tokens,
        output_tokens, busy_run, busy_until FROM sessions;
    CREATE TABLE session_messages_owned (
        principal  TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        turn       INTEGER NOT NULL,
        run_id     TEXT NOT NULL,
        message    TEXT NOT NULL,               -- JSON, one OpenAI chat message
        PRIMARY KEY (principal, session_id, seq)
    ) WITHOUT ROWID;
    INSERT INTO session_messages_owned SELECT COALESCE(s.principal, ''), m.session_id, m.seq, m.turn, m.run_id, m.message
        FROM session_messages AS m LEFT JOIN sessions AS s ON s.id = m.session_id;
    DROP TABLE session_messages;
    DROP TABLE sessions;
    ALTER TABLE sessions_owned RENAME TO sessions;
    ALTER TABLE session_messages_owned RENAME TO session_messages;
    CREATE INDEX sessions_updated ON sessions(updated_at);
    CREATE INDEX sessions_busy ON sessions(busy_run)
    """,
]


class SchemaTooNew(SkillyardError):
    """The file was written by a newer skillyard, whose schema this one does not know."""

    def __init__(self, version: int):
        super().__init__(f"schema version {version}, newer than this skillyard knows ({len(MIGRATIONS)})")
        self.version = version


def migrate(connection: sqlite3.Connection) -> int:
    """Apply the migrations this database has not seen; returns the schema version.

    Runs under BEGIN IMMEDIATE so that processes opening a new store at once do not race.
    The connection must be in autocommit mode (isolation_level=None). A store that is up to
    date is only read: reopening it writes nothing and takes no write lock.
    """
    try:
        row = connection.execute("SELECT version FROM schema_version").fetchone()
    except sqlite3.OperationalError:  # no such table: a new file
        row = None
    if row is not None and row[0] == len(MIGRATIONS):
        return len(MIGRATIONS)
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = connection.execute("SELECT version FROM schema_version").fetchone()
        version = row[0] if row else 0
        if version > len(MIGRATIONS):
            raise SchemaTooNew(version)
        for number in range(version, len(MIGRATIONS)):
            for statement in (part.strip() for part in MIGRATIONS[number].split(";")):
                if statement:
                    connection.execute(statement)
        if row is None:
            connection.execute("INSERT INTO schema_version (version) VALUES (?)", (len(MIGRATIONS),))
        elif version != len(MIGRATIONS):
            connection.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS),))
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return len(MIGRATIONS)


EVENTS_CHANNEL = "skillyard_events"  # after each committed batch: "<run_id> <last seq>" per run
TOOL_SETTINGS_CHANNEL = "skillyard_tool_settings"  # after a change of tool settings: "<origin> <tool name>"

_PG_TYPES = [
    (re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),  # SQLite's INTEGER is 64 bits: ms timestamps need them
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\s*WITHOUT ROWID"), ""),
]


def postgres_ddl(migration: str) -> str:
    """A migration of MIGRATIONS as PostgreSQL reads it (nothing for a SQLite-only one)."""
    if migration.lstrip().startswith(SQLITE_ONLY):
        return ""
    for pattern, replacement in _PG_TYPES:
        migration = pattern.sub(replacement, migration)
    return migration


@dataclass(frozen=True)
class Dialect:
    """Where the writer's statements differ between SQLite and PostgreSQL (JSON operators, NULL equality)."""

    name: str

    @property
    def pg(self) -> bool:
        return self.name == "postgresql"

    @property
    def event_rows(self) -> str:
        """The table of event rows (SQLite's `events` is a view over it and the packed runs:
        migration 11). The writer's lookups read the table: a run whose events were packed
        has ended, and no later event of it looks its start up."""
        return "events" if self.pg else "event_rows"

    def get(self, expr: str, path: str) -> str:
        """The SQL value at `path` ("a.b") of the JSON in `expr` (NULL when missing)."""
        if self.pg:
            return f"(({expr})::json #>> '{{{path.replace('.', ',')}}}')"
        return f"json_extract({expr}, '$.{path}')"

    def raw(self, expr: str, path: str) -> str:
        """The JSON text at `path` of the JSON in `expr` ('null' for JSON null, NULL when missing in PostgreSQL)."""
        if self.pg:
            return f"(({expr})::json #> '{{{path.replace('.', ',')}}}')::text"
        return f"json_quote(json_extract({expr}, '$.{path}'))"

    def same(self, left: str, right: str) -> str:
        """Equality where NULL equals NULL."""
        return f"{left} IS NOT DISTINCT FROM {right}" if self.pg else f"{left} IS {right}"


SQLITE = Dialect("sqlite")
POSTGRESQL = Dialect("postgresql")
_EVENT_COLUMNS = "events (run_id, seq, type, ts, tool_call_id, step_id, skill, data)"
# A run's row as the writer inserts it: `running` with no end, or (started and ended within one
# batch, rows.py) already finished
_RUN_COLUMN_NAMES = "id, kind, name, status, started_at, finished_at, input, output, error, usage, pid, host"
_RUN_COLUMNS = f"runs ({_RUN_COLUMN_NAMES})"
_LOG_COLUMNS = "tool_logs (run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at)"

# One event row, ready: SQLite's writer takes a batch of them in multi-row statements (the
# events of runs it does not pack, packing.py); PostgreSQL through INSERT_EVENTS_PG.
INSERT_EVENT = ("INSERT INTO event_rows (run_id, seq, type, ts, tool_call_id, step_id, skill, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
# SQLite's run row may bring the run's packed events (the last value; NULL: its events are rows)
SQLITE_RUN_START = (f"INSERT INTO runs ({_RUN_COLUMN_NAMES}, packed_events) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING")

# PostgreSQL: a batch as one flat JSON array of ready values, EVENT_WIDTH per event (one
# parameter, one round trip; the server parses no event's data: `data` is a JSON string
# holding the data's text; jsonb: its elements are reached by index in constant time), each
# row once (a batch written twice changes nothing); the same statement NOTIFYs
# EVENTS_CHANNEL with each run's last seq, delivered on commit.
INSERT_EVENTS_PG = (
    "WITH a AS (SELECT %s::jsonb AS v), "
    "r AS (SELECT v->>(8*i) AS run_id, (v->>(8*i+1))::bigint AS seq, v->>(8*i+2) AS type, (v->>(8*i+3))::bigint AS ts, "
    "v->>(8*i+4) AS call, v->>(8*i+5) AS step, v->>(8*i+6) AS skill, v->>(8*i+7) AS data "
    "FROM a, generate_series(0, jsonb_array_length(v) / 8 - 1) AS i), "
    f"i AS (INSERT INTO {_EVENT_COLUMNS} SELECT * FROM r ON CONFLICT DO NOTHING) "
    f"SELECT pg_notify('{EVENTS_CHANNEL}', run_id || ' ' || max(seq)) FROM r GROUP BY run_id"
)


def implied_statements(d: Dialect) -> dict[str, str]:
    """The statements of the rows that events imply, by name (rows.py computes their
    parameters, in the order given there). A tool call's run is the call whose
    `tool_call_start` is the run's event 1: only its terminal event ends the run. A tool log
    whose call start this process did not see finds it in `events` (tool_log_lookup: a
    statement of its own, as SQLite evaluates such a subquery even where coalesce does not
    need it)."""
    start = (f"(SELECT s.data FROM {d.event_rows} AS s WHERE s.run_id = ? AND s.seq < ? AND s.type = 'tool_call_start' "
             f"AND {d.same('s.tool_call_id', '?')} ORDER BY s.seq DESC LIMIT 1)")
    return {
        "run_start": f"INSERT INTO {_RUN_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        "agent_end": "UPDATE runs SET status = ?, finished_at = ?, output = ?, error = ?, usage = ? WHERE id = ?",
        "tool_log": f"INSERT INTO {_LOG_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        "tool_log_lookup": f"INSERT INTO {_LOG_COLUMNS} VALUES (?, ?, coalesce({d.get(start, 'tool')}, '?'), "
                           f"coalesce({d.raw(start, 'arguments')}, 'null'), ?, ?, ?, ?, ?)",
        "tool_end": "UPDATE runs SET status = ?, finished_at = ?, output = ?, error = ?, usage = ? WHERE id = ? AND EXISTS ("
                    f"SELECT 1 FROM {d.event_rows} AS s WHERE s.run_id = runs.id AND s.seq = 1 AND s.type = 'tool_call_start' "
                    f"AND {d.same('s.tool_call_id', '?')})",
        "exchange": "INSERT INTO model_exchanges (run_id, seq, tool_call_id, step_id, skill, model, attempt, messages, response) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    }


# PostgreSQL takes the implied rows of a batch as one JSON array per statement (one parameter:
# psycopg's executemany costs this process ~25 µs per row), the values in the order of the
# `?` placeholders of implied_statements. tool_log_lookup (rare) keeps executemany.
_PG_ROWS = "json_array_elements(%s::json) AS e(v)"
POSTGRES_BULK = {
    "run_start": f"INSERT INTO {_RUN_COLUMNS} SELECT v->>0, v->>1, v->>2, v->>3, (v->>4)::bigint, (v->>5)::bigint, "
                 f"v->>6, v->>7, v->>8, v->>9, (v->>10)::bigint, v->>11 FROM {_PG_ROWS} ON CONFLICT DO NOTHING",
    "agent_end": "UPDATE runs SET status = v->>0, finished_at = (v->>1)::bigint, output = v->>2, error = v->>3, usage = v->>4 "
                 f"FROM {_PG_ROWS} WHERE runs.id = v->>5",
    "tool_log": f"INSERT INTO {_LOG_COLUMNS} SELECT v->>0, v->>1, v->>2, v->>3, v->>4, v->>5, v->>6, "
                f"(v->>7)::double precision, (v->>8)::bigint FROM {_PG_ROWS}",
    "tool_end": "UPDATE runs SET status = v->>0, finished_at = (v->>1)::bigint, output = v->>2, error = v->>3, usage = v->>4 "
                f"FROM {_PG_ROWS} WHERE runs.id = v->>5 AND EXISTS (SELECT 1 FROM events AS s WHERE s.run_id = runs.id "
                "AND s.seq = 1 AND s.type = 'tool_call_start' AND s.tool_call_id IS NOT DISTINCT FROM v->>6)",
    "exchange": "INSERT INTO model_exchanges (run_id, seq, tool_call_id, step_id, skill, model, attempt, messages, response) "
                "SELECT v->>0, (v->>1)::bigint, v->>2, v->>3, v->>4, v->>5, (v->>6)::bigint, v->>7, v->>8 "
                f"FROM {_PG_ROWS} ON CONFLICT DO NOTHING",
}

# SQLite ends runs in bulk too (one statement for a batch's runs, not one per run: each lets go
# of the GIL and must win it back): an upsert of the ended runs that exist, whose conflict
# updates them (SQLite 3.24+; UPDATE … FROM would need 3.33). Values as implied_statements.
_SQLITE_END = ("INSERT INTO runs (id, kind, name, status, started_at, finished_at, output, error, usage) "
               "SELECT column{id}, '', '', column1, 0, column2, column3, column4, column5 FROM (VALUES ({marks})) "
               "WHERE EXISTS (SELECT 1 FROM runs AS r WHERE r.id = column{id}){guard} "
               "ON CONFLICT (id) DO UPDATE SET status = excluded.status, finished_at = excluded.finished_at, "
               "output = excluded.output, error = excluded.error, usage = excluded.usage")
SQLITE_BULK = {
    "agent_end": _SQLITE_END.format(id=6, marks=", ".join("?" * 6), guard=""),
    "tool_end": _SQLITE_END.format(id=6, marks=", ".join("?" * 7), guard=(
        " AND EXISTS (SELECT 1 FROM event_rows AS s WHERE s.run_id = column6 AND s.seq = 1 "
        "AND s.type = 'tool_call_start' AND s.tool_call_id IS column7)")),
}
