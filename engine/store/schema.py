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
