"""The run store in one process: schema migrations, redaction on disk, ordering when a run
fails or is cancelled, replay without a model, the query API, and the listener's cost.

Every test uses a real SQLite file in a temp directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine import Engine
from engine.batch.replay import REPLAY_MODEL, ReplayProvider, replay_project
from engine.providers.mock import MockProvider
from engine.providers.registry import register_provider
from engine.runtime.events import Event
from engine.safety.redaction import REDACTED, Redactor
from engine.store import RunStore, StoreError
from engine.store import sqlite as store_sqlite
from engine.store.schema import MIGRATIONS
from store_support import SECRETS, assert_gap_free, make_read_only, query, write_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "runs.db"


def _tables(path: Path) -> set[str]:
    return {name for (name,) in query(path, "SELECT name FROM sqlite_master WHERE type IN ('table', 'index', 'view')")}


# ─── 6. migrations and opening ────────────────────────────────────────────────────────


def test_a_new_file_gets_the_current_schema_in_wal_mode(db: Path) -> None:
    with RunStore(db) as store:
        assert store.schema_version == len(MIGRATIONS)
    assert query(db, "SELECT version FROM schema_version") == [(len(MIGRATIONS),)]
    assert {"runs", "events", "tool_logs", "model_exchanges", "tool_settings", "tool_logs_run"} <= _tables(db)
    assert query(db, "PRAGMA journal_mode") == [("wal",)]


def test_reopening_an_up_to_date_store_writes_nothing(db: Path) -> None:
    RunStore(db).close()
    before = db.read_bytes()
    for _ in range(2):
        with RunStore(db) as store:
            assert store.interrupted == 0
    assert db.read_bytes() == before, "reopening must not change the file"
    assert query(db, "SELECT version FROM schema_version") == [(len(MIGRATIONS),)]


def test_an_older_store_is_migrated_and_keeps_its_runs(db: Path) -> None:
    db.parent.mkdir(parents=True)
    connection = sqlite3.connect(db)
    connection.executescript(MIGRATIONS[0])
    connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    connection.execute("INSERT INTO schema_version VALUES (1)")
    connection.execute("INSERT INTO runs (id, kind, name, status, started_at, finished_at) VALUES ('run_old', 'tool', 'report', 'ok', 1, 2)")
    connection.commit()
    connection.close()
    with RunStore(db) as store:
        assert store.schema_version == len(MIGRATIONS)
        assert store.run("run_old").status == "ok"  # type: ignore[union-attr]
    assert query(db, "SELECT version FROM schema_version") == [(len(MIGRATIONS),)]
    assert {"tool_settings", "tool_logs_run"} <= _tables(db)


def test_many_races_of_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    """Switching a new file to WAL takes a lock SQLite's busy timeout does not wait for: about
    1 race in 40 failed with "database is locked" before connect() waited for it."""
    failures: list[str] = []
    for trial in range(80):
        path = tmp_path / f"race{trial}" / "runs.db"
        path.parent.mkdir()
        start = threading.Barrier(6)

        def open_one(start: threading.Barrier = start, path: Path = path) -> None:
            start.wait()
            try:
                store_sqlite.connect(path).close()
            except sqlite3.Error as exc:
                failures.append(str(exc))

        threads = [threading.Thread(target=open_one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert failures == []


def test_a_store_from_a_newer_skillyard_is_a_clear_error(db: Path) -> None:
    RunStore(db).close()
    connection = sqlite3.connect(db)
    connection.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS) + 7,))
    connection.commit()
    connection.close()
    with pytest.raises(StoreError) as caught:
        RunStore(db)
    message = str(caught.value)
    assert f"schema version {len(MIGRATIONS) + 7}" in message and "newer skillyard" in message
    assert "upgrade skillyard" in message and "--no-store" in message
    assert query(db, "SELECT version FROM schema_version") == [(len(MIGRATIONS) + 7,)], "left untouched"


def test_a_corrupt_file_is_a_clear_error(db: Path) -> None:
    db.parent.mkdir(parents=True)
    db.write_bytes(b"not a database: " + os.urandom(8192))
    with pytest.raises(StoreError) as caught:
        RunStore(db)
    assert f"cannot open the run store {db}" in str(caught.value)
    assert "not a database" in str(caught.value) and "--no-store" in str(caught.value)


@pytest.mark.slow
def test_a_read_only_directory_is_a_clear_error(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    make_read_only(tmp_path / "ro", request)
    with pytest.raises(StoreError) as caught:
        RunStore(tmp_path / "ro" / "runs.db")
    assert "cannot open the run store" in str(caught.value) and "writable" in str(caught.value)


# ─── 3. redaction, checked in the file's bytes ────────────────────────────────────────


def _file_bytes(db: Path) -> bytes:
    """The database and its WAL and shared-memory files, as they are on disk."""
    return b"".join(path.read_bytes() for path in sorted(db.parent.glob(db.name + "*")))


def test_sensitive_values_never_reach_the_file_and_usage_numbers_do(project: Path, db: Path) -> None:
    engine = Engine.from_dir(project, store=db)
    args = {"user": "ann", **SECRETS}
    result = engine.call_tool_sync("login", args)
    assert result.ok, result.error
    # A model's tool call arrives as raw JSON text; the store parses it before redacting.
    echoed = engine.call_tool_sync("loginEcho", json.dumps({"user": "bob", "password": SECRETS["password"]}))
    assert echoed.ok and SECRETS["password"] in echoed.data  # the mock model echoed it back
    engine.store.flush()  # type: ignore[union-attr]

    assert (db.parent / (db.name + "-wal")).stat().st_size > 0, "the rows are in the WAL before a checkpoint"
    for stage in ("wal", "checkpointed"):
        raw = _file_bytes(db)
        for name, secret in SECRETS.items():
            assert secret.encode() not in raw, f"{name} found in the {stage} file"
        assert REDACTED.encode() in raw
        usage = query(db, "SELECT usage FROM runs WHERE id = ?", (result.run_id,))[0][0]
        tokens = json.loads(usage)["input_tokens"]
        assert tokens > 0 and f'"input_tokens":{tokens}'.encode() in raw, "usage numbers are not redacted"
        if stage == "wal":
            engine.close()  # the last connection closing checkpoints the WAL into the main file

    with RunStore(db) as store:
        run = store.run(result.run_id)
        assert run is not None
        assert run.input == {"user": "ann", "password": REDACTED, "api_key": REDACTED, "accessToken": REDACTED}
        assert run.output == result.data and run.usage["input_tokens"] > 0
        starts = [e for e in store.events(result.run_id) if e["type"] == "skill_start" and e["step_id"] == "connect"]
        assert starts[0]["data"]["input"]["credentials"] == {"accessToken": REDACTED}
        logs = store.tool_logs(run_id=echoed.run_id)
        assert json.loads(logs[0]["input"]) == {"user": "bob", "password": REDACTED}
        echo_prompt = store.model_exchanges(echoed.run_id)[0]["messages"][-1]["content"]
        assert echo_prompt == f"Check that bob may log in with {REDACTED}."


def test_a_password_rendered_into_a_prompt_is_hidden_when_arguments_are_a_dict(project: Path, db: Path) -> None:
    engine = Engine.from_dir(project, store=db)
    assert engine.call_tool_sync("loginEcho", {"user": "bob", "password": SECRETS["password"]}).ok
    engine.close()
    assert SECRETS["password"].encode() not in _file_bytes(db)


def test_redactor_key_rules() -> None:
    redactor = Redactor()
    for key in ("password", "api_key", "apiKey", "X-Api-Key", "accessToken", "refresh_token", "OPENAI_API_KEY", "secretKey"):
        assert redactor.is_sensitive(key), key
    for key in ("input_tokens", "output_tokens", "max_tokens", "tokens", "keywords", "author"):
        assert not redactor.is_sensitive(key), key
    nested = {1: {"password": "p"}, "items": ({"token": "t"},), "usage": {"input_tokens": 3}}
    assert redactor.redact(nested) == {1: {"password": REDACTED}, "items": [{"token": REDACTED}], "usage": {"input_tokens": 3}}


# ─── 5. ordering when a run fails or is cancelled ─────────────────────────────────────


def test_a_failing_run_is_stored_in_order_with_status_error(project: Path, db: Path) -> None:
    seen: list[Event] = []
    engine = Engine.from_dir(project, store=db)
    result = engine.call_tool_sync("boom", {"message": "kaput"}, on_event=seen.append)
    engine.close()
    assert not result.ok and result.error.code == "execution_error"  # type: ignore[union-attr]
    rows = assert_gap_free(db, result.run_id)
    assert rows == [(e.seq, e.type) for e in seen]
    assert rows[-1][1] == "tool_call_error" and "skill_error" in [t for _, t in rows]
    with RunStore(db) as store:
        run = store.run(result.run_id)
        assert run is not None and run.status == "error" and run.finished_at is not None
        assert run.error["code"] == "execution_error" and "kaput" in run.error["message"]
        (log,) = store.tool_logs(tool="boom")
        assert log["status"] == "error" and "kaput" in log["error_message"] and log["run_id"] == result.run_id


def test_a_cancelled_run_is_stored_in_order_with_status_cancelled(project: Path, db: Path) -> None:
    seen: list[Event] = []
    engine = Engine.from_dir(project, store=db)

    async def main() -> str:
        sleeping = asyncio.Event()

        def on_event(event: Event) -> None:
            seen.append(event)
            if event.type == "skill_progress_delta":
                sleeping.set()

        task = asyncio.create_task(engine.call_tool("slow", {"seconds": 30}, on_event=on_event))
        await asyncio.wait_for(sleeping.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen[0].run_id

    started = time.monotonic()
    run_id = asyncio.run(main())
    assert time.monotonic() - started < 10
    engine.close()
    rows = assert_gap_free(db, run_id)
    assert rows == [(e.seq, e.type) for e in seen]
    assert rows[-1][1] == "tool_call_error"
    with RunStore(db) as store:
        run = store.run(run_id)
        assert run is not None and run.status == "cancelled" and run.error["code"] == "cancelled"
        assert run.finished_at is not None and run.finished_at >= run.started_at


def test_interleaved_concurrent_runs_keep_each_run_in_order(project: Path, db: Path) -> None:
    engine = Engine.from_dir(project, store=db)

    async def main() -> list:
        calls = [engine.call_tool("plan" if i % 3 == 0 else "report", {"topic": f"t{i}"} if i % 3 == 0 else {"text": f"a b {i}"})
                 for i in range(30)]
        return await asyncio.gather(*calls)

    results = asyncio.run(main())
    engine.close()
    assert all(r.ok for r in results)
    for result in results:
        rows = assert_gap_free(db, result.run_id)
        assert rows[0][1] == "tool_call_start" and rows[-1][1] == "tool_call_result"
    assert query(db, "SELECT status, COUNT(*) FROM runs GROUP BY status") == [("ok", 30)]
    assert query(db, "SELECT COUNT(*) FROM tool_logs WHERE status = 'success'") == [(30,)]


# ─── 4. replay without a model ────────────────────────────────────────────────────────


class CountingMock:
    calls = 0

    def __init__(self) -> None:
        self.inner = MockProvider()

    async def request(self, request, on_text=None):  # type: ignore[no-untyped-def]
        CountingMock.calls += 1
        return await self.inner.request(request, on_text)


def test_replay_reproduces_the_output_without_calling_a_provider(project: Path, db: Path) -> None:
    register_provider("store-test-counting", lambda spec: CountingMock())
    (project / "config" / "models.yaml").write_text("default: counted\nmodels:\n  counted: {provider: store-test-counting}\n")
    CountingMock.calls = 0
    engine = Engine.from_dir(project, store=db)
    recorded = engine.call_tool_sync("plan", {"topic": "databases"})
    engine.close()
    assert recorded.ok and CountingMock.calls == 1

    store = RunStore(db)
    run = store.run(recorded.run_id[:20])  # a prefix is enough
    assert run is not None and run.output == recorded.data
    provider = ReplayProvider(store.model_exchanges(run.id))
    replayed = Engine(replay_project(Engine.from_dir(project).project, provider)).call_tool_sync(
        run.name, run.input, model=REPLAY_MODEL)
    assert replayed.ok and replayed.data == run.output
    assert provider.position == 1 and not provider.mismatches
    assert CountingMock.calls == 1, "replay must not call the model's provider"

    # The prompt changes: the step fails with the difference, still without a model call.
    skills = project / "skills.yaml"
    skills.write_text(skills.read_text().replace("Write a short plan about", "Write a detailed plan about"))
    provider = ReplayProvider(store.model_exchanges(run.id))
    changed = Engine(replay_project(Engine.from_dir(project).project, provider)).call_tool_sync(
        run.name, run.input, model=REPLAY_MODEL)
    store.close()
    assert not changed.ok and len(provider.mismatches) == 1
    diff = provider.mismatches[0].diff
    assert "-Write a short plan about databases." in diff and "+Write a detailed plan about databases." in diff
    assert provider.mismatches[0].step_id == "outline"
    assert CountingMock.calls == 1


# ─── the query API, flush and close ───────────────────────────────────────────────────


def test_query_api_filters_prefixes_and_prune(project: Path, db: Path) -> None:
    engine = Engine.from_dir(project, store=db)
    ok = [engine.call_tool_sync("report", {"text": f"one two {i}"}) for i in range(3)]
    failed = engine.call_tool_sync("boom", {})
    engine.close()
    store = RunStore(db)
    assert [r.id for r in store.runs()] == [failed.run_id, *reversed([r.run_id for r in ok])]
    assert [r.id for r in store.runs(tool="report", limit=2)] == [ok[2].run_id, ok[1].run_id]
    assert [r.id for r in store.runs(status="error")] == [failed.run_id]
    assert store.runs(since_ms=int(time.time() * 1000) + 60_000) == []
    assert store.run(ok[0].run_id).to_dict()["duration_ms"] >= 0  # type: ignore[union-attr]
    with pytest.raises(StoreError, match="matches several runs"):
        store.run("run")
    assert store.run("run_%") is None and store.run("nope") is None and store.run("") is None
    assert [log["status"] for log in store.tool_logs(limit=10)] == ["error", "success", "success", "success"]
    assert store.tool_logs(status="error")[0]["run_id"] == failed.run_id

    old = int(time.time() * 1000) - 40 * 86_400_000
    connection = sqlite3.connect(db)
    connection.execute("UPDATE runs SET started_at = ? WHERE id IN (?, ?)", (old, ok[0].run_id, failed.run_id))
    connection.execute("INSERT INTO runs (id, kind, name, status, started_at, pid, host) VALUES ('run_live', 'tool', 'x', 'running', ?, 1, 'elsewhere')", (old,))
    connection.commit()
    connection.close()
    assert store.prune(30 * 86_400_000) == 2
    assert {r.id for r in store.runs(limit=100)} == {ok[1].run_id, ok[2].run_id, "run_live"}, "running runs are kept"
    for table in ("events", "tool_logs"):
        assert query(db, f"SELECT COUNT(*) FROM {table} WHERE run_id IN (?, ?)", (ok[0].run_id, failed.run_id)) == [(0,)]
    store.close()


def test_a_run_id_prefix_is_not_a_like_pattern(db: Path) -> None:
    with RunStore(db) as store:
        connection = sqlite3.connect(db)
        connection.execute("INSERT INTO runs (id, kind, name, status, started_at) VALUES ('runXabc', 'tool', 't', 'ok', 1)")
        connection.commit()
        connection.close()
        assert store.run("run_") is None, "`_` is not a wildcard"
        assert store.run("runX").id == "runXabc"  # type: ignore[union-attr]


def test_flush_waits_for_the_batch_being_written_and_close_is_idempotent(db: Path) -> None:
    store = RunStore(db)
    for seq in range(1, 2001):
        store.listener(Event("tool_progress_delta", "run_flush", seq, 1, "call_1", data={"stage": "x", "message": "m"}))
    store.flush()
    assert query(db, "SELECT COUNT(*) FROM events") == [(2000,)]
    store.close()
    store.close()
    store.flush()  # after close: nothing to wait for, no error


def _hold_write_lock(db: Path, seconds: float) -> threading.Thread:
    """Another writer keeps the database locked for a while (as a long transaction elsewhere would)."""
    locked = threading.Event()

    def hold() -> None:
        connection = sqlite3.connect(db, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        locked.set()
        time.sleep(seconds)
        connection.execute("COMMIT")
        connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    locked.wait()
    return thread


def _progress(run_id: str, seq: int) -> Event:
    return Event("tool_progress_delta", run_id, seq, 1, "call_1", data={"stage": "x", "message": "m"})


def test_a_batch_locked_out_past_the_busy_timeout_is_retried_in_order(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_sqlite, "BUSY_TIMEOUT_MS", 30)
    store = RunStore(db)
    holder = _hold_write_lock(db, 0.15)
    for seq in range(1, 101):
        store.listener(_progress("run_locked", seq))
    store.flush()  # no error: the batch waited and went in
    holder.join()
    assert_gap_free(db, "run_locked")
    assert query(db, "SELECT COUNT(*) FROM events") == [(100,)]
    store.close()


def test_a_write_that_keeps_failing_is_reported_by_flush_once(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_sqlite, "BUSY_TIMEOUT_MS", 30)
    monkeypatch.setattr(store_sqlite, "WRITE_ATTEMPTS", 1)
    store = RunStore(db)
    holder = _hold_write_lock(db, 0.3)
    store.listener(_progress("run_lost", 1))
    with pytest.raises(StoreError, match="some events were not recorded: database is locked"):
        store.flush()
    holder.join()
    store.listener(_progress("run_later", 1))
    store.flush()  # the failure was reported; the store keeps working
    assert query(db, "SELECT run_id FROM events") == [("run_later",)]
    store.close()


@pytest.mark.slow
def test_events_queued_by_a_process_that_never_closes_its_store_are_written_at_exit(project: Path, db: Path) -> None:
    script = (
        "import sys; from engine import Engine\n"
        "engine = Engine.from_dir(sys.argv[1], store=sys.argv[2])\n"
        "print(engine.call_tool_sync('report', {'text': 'a b c'}).run_id)\n"
        "engine.store.listener(__import__('engine').Event('tool_progress_delta', 'run_late', 1, 1, data={}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(project), str(db)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert query(db, "SELECT status FROM runs WHERE id = ?", (run_id,)) == [("ok",)]
    assert query(db, "SELECT COUNT(*) FROM events WHERE run_id = 'run_late'") == [(1,)]


# ─── 8. the listener never blocks ─────────────────────────────────────────────────────


def test_the_listener_is_tiny_compared_to_a_call(db: Path) -> None:
    """Only a catastrophic regression fails this; the real targets are in the benchmark."""
    events = [
        Event("skill_progress_delta", f"run_{i // 50}", i % 50 + 1, 1, "call_x", "step", "skill", {"message": "m", "n": i})
        for i in range(10_000)
    ]
    with RunStore(db) as store:
        listener = store.listener
        started = time.perf_counter()
        for event in events:
            listener(event)
        elapsed = time.perf_counter() - started
        assert elapsed < 0.5, f"10,000 listener calls took {elapsed:.3f}s"
        store.flush()
    assert query(db, "SELECT COUNT(*) FROM events") == [(10_000,)]
