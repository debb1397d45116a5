"""The run store's schema, as numbered migrations applied on open, and the writer's statements.

One definition, two dialects: the migrations are written for SQLite and rendered for
PostgreSQL by `postgres_ddl` (64-bit integers, identity keys, no WITHOUT ROWID); the
writer's statements are built from `Dialect` helpers, which differ only where SQLite's
json_extract/json_quote and PostgreSQL's json operators differ.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

MIGRATIONS: list[str] = [
    # 1: runs, their events, tool execution logs (seed 000 §2.2), model exchanges for replay
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
    # 2: tool settings layered over the YAML (seed 000's admin table)
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
]


class SchemaTooNew(Exception):
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


TOOL_LOG_OUTPUT_CHARS = 10_000
EVENTS_CHANNEL = "skillyard_events"  # after each committed batch: "<run_id> <last seq>" per run
TOOL_SETTINGS_CHANNEL = "skillyard_tool_settings"  # after a change of tool settings: "<origin> <tool name>"

_PG_TYPES = [
    (re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),  # SQLite's INTEGER is 64 bits: ms timestamps need them
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\s*WITHOUT ROWID"), ""),
]


def postgres_ddl(migration: str) -> str:
    """A migration of MIGRATIONS as PostgreSQL reads it."""
    for pattern, replacement in _PG_TYPES:
        migration = pattern.sub(replacement, migration)
    return migration


@dataclass(frozen=True)
class Dialect:
    """How the writer's statements read JSON and parameters in one database."""

    name: str

    @property
    def pg(self) -> bool:
        return self.name == "postgresql"

    def param(self, name: str) -> str:
        return f"%({name})s" if self.pg else f":{name}"

    def get(self, expr: str, path: str, cast: str = "") -> str:
        """The SQL value at `path` ("a.b") of the JSON in `expr` (NULL when missing)."""
        if self.pg:
            value = f"(({expr})::json #>> '{{{path.replace('.', ',')}}}')"
            return f"{value}::{cast}" if cast else value
        return f"json_extract({expr}, '$.{path}')"

    def raw(self, expr: str, path: str) -> str:
        """The JSON text at `path` of the JSON in `expr` ('null' for JSON null, NULL when missing in PostgreSQL)."""
        if self.pg:
            return f"(({expr})::json #> '{{{path.replace('.', ',')}}}')::text"
        return f"json_quote(json_extract({expr}, '$.{path}'))"

    def same(self, left: str, right: str) -> str:
        """Equality where NULL equals NULL."""
        return f"{left} IS NOT DISTINCT FROM {right}" if self.pg else f"{left} IS {right}"

    def insert_ignore(self, into: str, select: str) -> str:
        """INSERT … SELECT that skips rows whose key is already there (a batch written twice)."""
        if self.pg:
            return f"INSERT INTO {into} {select} ON CONFLICT DO NOTHING"
        return f"INSERT OR IGNORE INTO {into} {select}"

    def json_object(self, *pairs: str) -> str:
        return f"json_build_object({', '.join(pairs)})::text" if self.pg else f"json_object({', '.join(pairs)})"

    def rows(self, param: str) -> str:
        """A batch (one JSON array of rows [run_id, seq, type, ts, call, step, skill, data]) as a table.

        SQLite: json_extract and json_quote, not -> and ->>, which need SQLite 3.38 (some Linux
        distributions still ship older ones). PostgreSQL: `json`, not `jsonb`: it keeps each
        event's text as it came (no re-encoding) and parses faster; `data` stays json here.
        """
        if self.pg:
            return (
                "SELECT value->>0 AS run_id, (value->>1)::bigint AS seq, value->>2 AS type, (value->>3)::bigint AS ts, "
                "value->>4 AS call, value->>5 AS step, value->>6 AS skill, value->7 AS data "
                f"FROM json_array_elements(CAST({self.param(param)} AS json))"
            )
        columns = ", ".join(f"json_extract(value, '$[{i}]') AS {name}" for i, name in enumerate(
            ("run_id", "seq", "type", "ts", "call", "step", "skill")
        )) + ", json_quote(json_extract(value, '$[7]')) AS data"
        return f"SELECT {columns} FROM json_each(CAST({self.param(param)} AS TEXT))"


SQLITE = Dialect("sqlite")
POSTGRESQL = Dialect("postgresql")
_EVENT_COLUMNS = "events (run_id, seq, type, ts, tool_call_id, step_id, skill, data)"


def insert_events(d: Dialect) -> str:
    """One batch of events (parameter `rows`), each once: a batch written twice changes nothing.

    PostgreSQL: the same statement notifies EVENTS_CHANNEL with each run's last seq (delivered
    on commit), so followers in other processes learn of new events at once.
    """
    if not d.pg:
        return d.insert_ignore(_EVENT_COLUMNS, f"SELECT * FROM ({d.rows('rows')})")
    return (
        f"WITH r AS ({d.rows('rows')}), "
        f"i AS ({d.insert_ignore(_EVENT_COLUMNS, 'SELECT run_id, seq, type, ts, call, step, skill, data::text FROM r')}) "
        f"SELECT pg_notify('{EVENTS_CHANNEL}', run_id || ' ' || max(seq)) FROM r GROUP BY run_id"
    )


def implied_rows(d: Dialect) -> list[tuple[frozenset[str], str]]:
    """The rows that events imply (a run, its end, a tool log, a model exchange), written in
    the same transaction as the events, from a second, small array that holds only the events
    of those types (IMPLYING_TYPES). Parameters: `rows` that array, `pid` and `host` the
    writing process.

    A tool call's run is the call whose `tool_call_start` is the run's event 1; its terminal
    event ends the run. A tool log's input is the arguments of the call's `tool_call_start`,
    looked up in `events` (inserted just before, or by an earlier batch).
    """
    implied = f"({d.rows('rows')})"
    pid, host = d.param("pid"), d.param("host")
    start_of_call = (
        "(SELECT s.data FROM events AS s WHERE s.run_id = e.run_id AND s.seq < e.seq AND s.type = 'tool_call_start' "
        f"AND {d.same('s.tool_call_id', 'e.call')} ORDER BY s.seq DESC LIMIT 1)"
    )
    run_columns = "runs (id, kind, name, status, started_at, input, pid, host)"
    return [
        (frozenset({"tool_call_start"}), d.insert_ignore(run_columns, f"""
            SELECT run_id, 'tool', coalesce({d.get('data', 'tool')}, '?'), 'running', ts, coalesce({d.raw('data', 'arguments')}, 'null'), {pid}, {host}
            FROM {implied} AS e WHERE type = 'tool_call_start' AND seq = 1""")),
        (frozenset({"agent_start"}), d.insert_ignore(run_columns, f"""
            SELECT run_id, 'agent', coalesce({d.get('data', 'model')}, '?'), 'running', ts, coalesce({d.raw('data', 'input')}, 'null'), {pid}, {host}
            FROM {implied} AS e WHERE type = 'agent_start'""")),
        (frozenset({"agent_done"}), f"""
            UPDATE runs SET
                status = CASE {d.get('e.data', 'stop_reason')} WHEN 'answer' THEN 'ok' WHEN 'cancelled' THEN 'cancelled' ELSE 'error' END,
                finished_at = e.ts,
                output = coalesce({d.raw('e.data', 'answer')}, 'null'),
                error = CASE WHEN {d.same(d.get('e.data', 'stop_reason'), "'answer'")} THEN NULL
                             ELSE {d.json_object("'code'", d.get('e.data', 'stop_reason'), "'message'", d.get('e.data', 'error'))} END,
                usage = coalesce({d.raw('e.data', 'usage')}, 'null')
            FROM {implied} AS e WHERE e.type = 'agent_done' AND runs.id = e.run_id"""),
        (frozenset({"tool_call_result", "tool_call_error"}), f"""
            INSERT INTO tool_logs (run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at)
            SELECT e.run_id, coalesce(e.call, ''), coalesce({d.get(start_of_call, 'tool')}, '?'),
                   coalesce({d.raw(start_of_call, 'arguments')}, 'null'),
                   CASE WHEN e.type = 'tool_call_result' THEN substr(coalesce({d.raw('e.data', 'data')}, 'null'), 1, {TOOL_LOG_OUTPUT_CHARS}) END,
                   CASE WHEN e.type = 'tool_call_result' THEN 'success'
                        WHEN {d.same(d.get('e.data', 'error.code'), "'timeout'")} THEN 'timeout' ELSE 'error' END,
                   CASE WHEN e.type = 'tool_call_error'
                        THEN coalesce({d.get('e.data', 'error.code')}, 'None') || ': ' || coalesce({d.get('e.data', 'error.message')}, 'None') END,
                   {d.get('e.data', 'metadata.duration_ms', 'double precision')}, e.ts
            FROM {implied} AS e WHERE e.type IN ('tool_call_result', 'tool_call_error')"""),
        (frozenset({"tool_call_result", "tool_call_error"}), f"""
            UPDATE runs SET
                status = CASE WHEN e.type = 'tool_call_result' THEN 'ok'
                              WHEN {d.same(d.get('e.data', 'error.code'), "'cancelled'")} THEN 'cancelled' ELSE 'error' END,
                finished_at = e.ts,
                output = CASE WHEN e.type = 'tool_call_result' THEN coalesce({d.raw('e.data', 'data')}, 'null') END,
                error = CASE WHEN e.type = 'tool_call_error' THEN coalesce(nullif({d.raw('e.data', 'error')}, 'null'), '{{}}') END,
                usage = coalesce({d.raw('e.data', 'metadata.usage')}, 'null')
            FROM {implied} AS e
            WHERE e.type IN ('tool_call_result', 'tool_call_error') AND runs.id = e.run_id AND EXISTS (
                SELECT 1 FROM events AS s
                WHERE s.run_id = e.run_id AND s.seq = 1 AND s.type = 'tool_call_start' AND {d.same('s.tool_call_id', 'e.call')})"""),
        (frozenset({"model_exchange"}), d.insert_ignore(
            "model_exchanges (run_id, seq, tool_call_id, step_id, skill, model, attempt, messages, response)", f"""
            SELECT run_id, seq, call, step, skill, {d.get('data', 'model')}, {d.get('data', 'attempt', 'bigint')}, coalesce({d.raw('data', 'messages')}, 'null'),
                   coalesce({d.get('data', 'response')}, '')
            FROM {implied} AS e WHERE type = 'model_exchange'""")),
    ]


# The SQLite writer's statements (sqlite.py); postgres.py builds its own from POSTGRESQL.
INSERT_EVENTS = insert_events(SQLITE)
IMPLIED_ROWS = implied_rows(SQLITE)
IMPLYING_TYPES = frozenset().union(*(types for types, _ in IMPLIED_ROWS))
