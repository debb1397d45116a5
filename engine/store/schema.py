"""The run store's SQLite schema, as numbered migrations applied on open."""

from __future__ import annotations

import sqlite3

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

# The writer's statements. A batch of events is one JSON array of rows
# [run_id, seq, type, ts, tool_call_id, step_id, skill, data], made by C calls only (sqlite.py),
# which SQLite unpacks without the GIL. json_extract and json_quote, not -> and ->>, which need
# SQLite 3.38 (some Linux distributions still ship older ones).
_COLUMNS = ", ".join(f"json_extract(value, '$[{i}]') AS {name}" for i, name in enumerate(
    ("run_id", "seq", "type", "ts", "call", "step", "skill")
)) + ", json_quote(json_extract(value, '$[7]')) AS data"
INSERT_EVENTS = (
    "INSERT OR IGNORE INTO events (run_id, seq, type, ts, tool_call_id, step_id, skill, data) "
    f"SELECT {_COLUMNS} FROM json_each(CAST(? AS TEXT))"
)

# The rows that events imply (a run, its end, a tool log, a model exchange), written in the
# same transaction as the events, from a second, small array that holds only the events of
# those types (IMPLYING_TYPES). Parameters: :rows that array, :pid and :host the writing process.
#
# A tool call's run is the call whose `tool_call_start` is the run's event 1; its terminal
# event ends the run. A tool log's input is the arguments of the call's `tool_call_start`,
# looked up in `events` (inserted just before, or by an earlier batch).
_IMPLIED = f"(SELECT {_COLUMNS} FROM json_each(CAST(:rows AS TEXT)))"
_START_OF_CALL = (
    "(SELECT s.data FROM events AS s WHERE s.run_id = e.run_id AND s.seq < e.seq AND s.type = 'tool_call_start' "
    "AND s.tool_call_id IS e.call ORDER BY s.seq DESC LIMIT 1)"
)
IMPLIED_ROWS: list[tuple[frozenset[str], str]] = [
    (frozenset({"tool_call_start"}), f"""
        INSERT OR IGNORE INTO runs (id, kind, name, status, started_at, input, pid, host)
        SELECT run_id, 'tool', coalesce(json_extract(data, '$.tool'), '?'), 'running', ts, coalesce(json_quote(json_extract(data, '$.arguments')), 'null'), :pid, :host
        FROM {_IMPLIED} WHERE type = 'tool_call_start' AND seq = 1"""),
    (frozenset({"agent_start"}), f"""
        INSERT OR IGNORE INTO runs (id, kind, name, status, started_at, input, pid, host)
        SELECT run_id, 'agent', coalesce(json_extract(data, '$.model'), '?'), 'running', ts, coalesce(json_quote(json_extract(data, '$.input')), 'null'), :pid, :host
        FROM {_IMPLIED} WHERE type = 'agent_start'"""),
    (frozenset({"agent_done"}), f"""
        UPDATE runs SET
            status = CASE json_extract(e.data, '$.stop_reason') WHEN 'answer' THEN 'ok' WHEN 'cancelled' THEN 'cancelled' ELSE 'error' END,
            finished_at = e.ts,
            output = coalesce(json_quote(json_extract(e.data, '$.answer')), 'null'),
            error = CASE WHEN json_extract(e.data, '$.stop_reason') IS 'answer' THEN NULL
                         ELSE json_object('code', json_extract(e.data, '$.stop_reason'), 'message', json_extract(e.data, '$.error')) END,
            usage = coalesce(json_quote(json_extract(e.data, '$.usage')), 'null')
        FROM {_IMPLIED} AS e WHERE e.type = 'agent_done' AND runs.id = e.run_id"""),
    (frozenset({"tool_call_result", "tool_call_error"}), f"""
        INSERT INTO tool_logs (run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at)
        SELECT e.run_id, coalesce(e.call, ''), coalesce(json_extract({_START_OF_CALL}, '$.tool'), '?'),
               coalesce(json_quote(json_extract({_START_OF_CALL}, '$.arguments')), 'null'),
               CASE WHEN e.type = 'tool_call_result' THEN substr(coalesce(json_quote(json_extract(e.data, '$.data')), 'null'), 1, {TOOL_LOG_OUTPUT_CHARS}) END,
               CASE WHEN e.type = 'tool_call_result' THEN 'success'
                    WHEN json_extract(e.data, '$.error.code') IS 'timeout' THEN 'timeout' ELSE 'error' END,
               CASE WHEN e.type = 'tool_call_error'
                    THEN coalesce(json_extract(e.data, '$.error.code'), 'None') || ': ' || coalesce(json_extract(e.data, '$.error.message'), 'None') END,
               json_extract(e.data, '$.metadata.duration_ms'), e.ts
        FROM {_IMPLIED} AS e WHERE e.type IN ('tool_call_result', 'tool_call_error')"""),
    (frozenset({"tool_call_result", "tool_call_error"}), f"""
        UPDATE runs SET
            status = CASE WHEN e.type = 'tool_call_result' THEN 'ok'
                          WHEN json_extract(e.data, '$.error.code') IS 'cancelled' THEN 'cancelled' ELSE 'error' END,
            finished_at = e.ts,
            output = CASE WHEN e.type = 'tool_call_result' THEN coalesce(json_quote(json_extract(e.data, '$.data')), 'null') END,
            error = CASE WHEN e.type = 'tool_call_error' THEN coalesce(nullif(json_quote(json_extract(e.data, '$.error')), 'null'), '{{}}') END,
            usage = coalesce(json_quote(json_extract(e.data, '$.metadata.usage')), 'null')
        FROM {_IMPLIED} AS e
        WHERE e.type IN ('tool_call_result', 'tool_call_error') AND runs.id = e.run_id AND EXISTS (
            SELECT 1 FROM events AS s
            WHERE s.run_id = e.run_id AND s.seq = 1 AND s.type = 'tool_call_start' AND s.tool_call_id IS e.call)"""),
    (frozenset({"model_exchange"}), f"""
        INSERT OR IGNORE INTO model_exchanges (run_id, seq, tool_call_id, step_id, skill, model, attempt, messages, response)
        SELECT run_id, seq, call, step, skill, json_extract(data, '$.model'), json_extract(data, '$.attempt'), coalesce(json_quote(json_extract(data, '$.messages')), 'null'),
               coalesce(json_extract(data, '$.response'), '')
        FROM {_IMPLIED} WHERE type = 'model_exchange'"""),
]
IMPLYING_TYPES = frozenset().union(*(types for types, _ in IMPLIED_ROWS))
