"""The events table's layout (schema migration 9) and what the SQLite writer binds.

Events live in a rowid table found through the index of (run_id, seq): a store written by an
older skillyard (events WITHOUT ROWID) is rebuilt on open and reads back exactly the same; a
batch written twice still adds nothing; PostgreSQL skips the SQLite-only migration. The
writer binds None as a NaN (SQLite stores NULL) and an event's data as text: the columns read
back as NULL and as the same text, never as a number or a blob.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.runtime.events import Event, encode_data
from engine.store import RunStore
from engine.store.ready import RowMaker
from engine.store.schema import MIGRATIONS, SQLITE_ONLY, postgres_ddl
from store_support import query


def _old_store(path: Path, versions: int) -> None:
    """A store as a skillyard that knew `versions` migrations left it, with two runs' events."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    for migration in MIGRATIONS[:versions]:
        connection.executescript(migration)
    connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    connection.execute("INSERT INTO schema_version VALUES (?)", (versions,))
    connection.execute("INSERT INTO runs (id, kind, name, status, started_at, finished_at) VALUES ('run_b', 'tool', 'report', 'ok', 1, 3)")
    rows = [("run_b", 2, "tool_call_result", 3, "call_1", None, None, '{"ok":true,"data":"é"}'),
            ("run_a", 1, "agent_start", 5, None, None, None, '{"model":"mock"}'),
            ("run_b", 1, "tool_call_start", 1, "call_1", "s", "k", '{"tool":"report","arguments":{}}')]
    connection.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    connection.commit()
    connection.close()


def test_an_older_store_gets_the_appended_events_table_and_reads_the_same(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _old_store(db, 8)
    assert "WITHOUT ROWID" in query(db, "SELECT sql FROM sqlite_master WHERE name = 'events'")[0][0]
    before = {}
    connection = sqlite3.connect(db)
    for run_id in ("run_a", "run_b"):
        before[run_id] = connection.execute("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
    connection.close()
    with RunStore(db) as store:
        assert store.schema_version == len(MIGRATIONS)
        assert [e["seq"] for e in store.events("run_b")] == [1, 2]
        assert store.events("run_b")[0] == {"type": "tool_call_start", "run_id": "run_b", "seq": 1, "ts": 1, "tool_call_id": "call_1",
                                            "step_id": "s", "skill": "k", "data": {"tool": "report", "arguments": {}}}
        assert store.events("run_b", after_seq=1)[0]["data"] == {"ok": True, "data": "é"}
        assert store.run("run_b").status == "ok"  # type: ignore[union-attr]
    for run_id, rows in before.items():
        assert query(db, f"SELECT * FROM events WHERE run_id = '{run_id}' ORDER BY seq") == rows
    table = query(db, "SELECT sql FROM sqlite_master WHERE name = 'event_rows'")[0][0]  # renamed by migration 11
    assert "WITHOUT ROWID" not in table and "PRIMARY KEY (run_id, seq)" in table
    assert query(db, "SELECT count(*) FROM sqlite_master WHERE tbl_name = 'event_rows' AND type = 'index'") == [(1,)]
    assert "events_appended" not in {name for (name,) in query(db, "SELECT name FROM sqlite_master")}
    plan = " ".join(str(row) for row in query(db, "EXPLAIN QUERY PLAN SELECT * FROM event_rows WHERE run_id = 'run_b' AND seq > 0 ORDER BY seq"))
    assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, plan  # the key's index, in seq order: no sort, no scan


def test_a_batch_written_twice_adds_no_event_and_none_is_null(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    events = [Event("tool_call_start", "run_x", 1, 10, "call_1", data={"tool": "t", "arguments": {"a": None}}),
              Event("step_start", "run_x", 2, 11, "call_1", "s1", None, data={"n": 1.5}),
              Event("tool_call_result", "run_x", 3, 12, "call_1", data={"ok": True, "data": None})]
    events = [event._replace(data_json=encode_data(event.data)) for event in events]
    with RunStore(db, redacted_events=True) as store:
        batch = RowMaker(store.database, store.failures).ready(events)
        store.database.write_rows(batch)
        store.database.write_rows(batch)
        assert [e["seq"] for e in store.events("run_x")] == [1, 2, 3]
        run = store.run("run_x")
        assert run is not None and (run.status, run.finished_at, run.output, run.error, run.usage) == ("ok", 12, None, None, None)
    rows = query(db, "SELECT seq, typeof(tool_call_id), typeof(step_id), step_id, typeof(skill), typeof(data), data FROM events ORDER BY seq")
    assert rows == [(1, "text", "null", None, "null", "text", '{"tool":"t","arguments":{"a":null}}'),
                    (2, "text", "text", "s1", "null", "text", '{"n":1.5}'),
                    (3, "text", "null", None, "null", "text", '{"ok":true,"data":null}')]
    logs = query(db, "SELECT typeof(error_message), typeof(output), status FROM tool_logs")  # (one per write: no key)
    assert logs and set(logs) == {("null", "text", "success")}
    assert query(db, "SELECT typeof(error), typeof(finished_at) FROM runs") == [("null", "integer")]


def test_tool_logs_keep_only_the_indexes_their_queries_use(tmp_path: Path) -> None:
    """tool_logs are read by tool, by run and newest first by id: no index on created_at."""
    db = tmp_path / "runs.db"
    _old_store(db, 9)
    assert query(db, "SELECT count(*) FROM sqlite_master WHERE name = 'tool_logs_created'") == [(1,)]
    RunStore(db).close()
    indexes = {name for (name,) in query(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tool_logs'")}
    assert indexes == {"tool_logs_tool", "tool_logs_run"}


def test_postgresql_skips_the_sqlite_only_migration() -> None:
    assert MIGRATIONS[8].lstrip().startswith(SQLITE_ONLY)
    assert postgres_ddl(MIGRATIONS[8]) == ""
    assert "CREATE TABLE" in postgres_ddl(MIGRATIONS[0]) and "WITHOUT ROWID" not in postgres_ddl(MIGRATIONS[0])


def test_an_agent_run_within_one_batch_is_the_same_row_as_one_split_across_batches(tmp_path: Path) -> None:
    """An agent run whose start and end are in one spill is inserted finished; its own tool
    calls end no run; split across two spills it is opened, then updated, to the same row."""
    def events(run_id: str) -> list[Event]:
        made = [Event("agent_start", run_id, 1, 10, data={"model": "mock", "input": "hi"}),
                Event("tool_call_start", run_id, 2, 11, "call_1", data={"tool": "lookup", "arguments": {"q": 1}}),
                Event("tool_call_result", run_id, 3, 12, "call_1", data={"ok": True, "data": "found"}),
                Event("agent_done", run_id, 4, 13, data={"stop_reason": "answer", "answer": "yes", "usage": {"input_tokens": 3}})]
        return [event._replace(data_json=encode_data(event.data)) for event in made]

    rows = {}
    for how, cut in (("one", 4), ("split", 2)):
        with RunStore(tmp_path / f"{how}.db", redacted_events=True) as store:
            maker = RowMaker(store.database, store.failures)
            first, second = maker.ready(events("run_a")[:cut]), maker.ready(events("run_a")[cut:]) if cut < 4 else None
            names = [name for name, _, _ in first.each_implied()] + ([name for name, _, _ in second.each_implied()] if second else [])
            assert names == (["run_start", "tool_log"] if how == "one" else ["run_start", "tool_log", "tool_end", "agent_end"])
            store.database.write_rows(first)
            if second is not None:
                store.database.write_rows(second)
            run = store.run("run_a")
            assert run is not None
            rows[how] = (run.to_dict(), [{**log, "id": 0} for log in store.tool_logs()])
    assert rows["one"] == rows["split"]
    assert (rows["one"][0]["status"], rows["one"][0]["output"], rows["one"][0]["usage"]) == ("ok", "yes", {"input_tokens": 3})
