"""The same store suite against both backends: SQLite (a file) and PostgreSQL (a throwaway
cluster, tests/pg_cluster.py; skipped with a reason when PostgreSQL is not installed).

Everything goes through the public store API (open_store, Engine.from_project(store=url))
plus a direct look at the database, as another program would.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine import Engine
from engine.link.linker import load_project
from engine.runtime.events import Event
from engine.safety.redaction import REDACTED
from engine.store import StoreError, open_store
from engine.store.schema import MIGRATIONS
from engine.store.tool_settings import ToolSetting
from engine.tool_admin import ToolAdmin
from store_support import SECRETS, write_project

TABLES = ("events", "runs", "tool_logs", "model_exchanges", "tool_settings", "run_owners")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store of each backend, as a URL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store/runs.db"
    url = str(request.getfixturevalue("pg_url"))
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:  # one database per module: empty it for each test
        if db.execute("SELECT to_regclass('runs')").fetchone()[0] is not None:
            db.execute(f"TRUNCATE {', '.join(TABLES)}")
    return url


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project")


def sql(url: str, query: str, params: tuple = ()) -> list[tuple]:
    """Read the database directly (`?` placeholders)."""
    if url.startswith("sqlite:///"):
        db = sqlite3.connect(url[len("sqlite:///"):], timeout=10)
        try:
            return db.execute(query, params).fetchall()
        finally:
            db.close()
    import psycopg

    with psycopg.connect(url) as db:
        return [tuple(row) for row in db.execute(query.replace("?", "%s"), params).fetchall()]


def everything(url: str) -> str:
    """Every row of every table as text (where a secret must never be)."""
    return "\n".join(repr(row) for table in TABLES for row in sql(url, f"SELECT * FROM {table}"))


def gap_free(url: str, run_id: str) -> list[tuple]:
    rows = sql(url, "SELECT seq, type FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
    assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1)), f"{run_id}: {rows}"
    return rows


def engine_on(project: Path, url: str) -> Engine:
    return Engine.from_project(load_project(project), store=url)


def test_a_new_store_gets_the_schema_and_reopening_it_changes_nothing(url: str) -> None:
    with open_store(url) as store:
        assert store.schema_version == len(MIGRATIONS)
    with open_store(url) as store:
        assert store.schema_version == len(MIGRATIONS) and store.interrupted == 0
    assert sql(url, "SELECT version FROM schema_version") == [(len(MIGRATIONS),)]


def test_stores_opened_at_once_on_a_new_database_do_not_race(request: pytest.FixtureRequest, tmp_path: Path, url: str) -> None:
    fresh = (f"sqlite:///{tmp_path}/race/runs.db" if url.startswith("sqlite")
             else request.getfixturevalue("pg_cluster").new_database())
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_one() -> None:
        start.wait()
        try:
            open_store(fresh).close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert sql(fresh, "SELECT version FROM schema_version") == [(len(MIGRATIONS),)]


def test_a_run_is_recorded_redacted_with_its_implied_rows(project: Path, url: str) -> None:
    engine = engine_on(project, url)
    result = engine.call_tool_sync("login", {"user": "ann", **SECRETS})
    assert result.ok, result.error
    engine.close()
    stored = everything(url)
    for name, secret in SECRETS.items():
        assert secret not in stored, f"{name} reached the {url.split(':')[0]} store"
    assert REDACTED in stored
    with open_store(url) as store:
        run = store.run(result.run_id)
        assert run is not None and run.status == "ok" and run.kind == "tool" and run.name == "login"
        assert run.input == {"user": "ann", "password": REDACTED, "api_key": REDACTED, "accessToken": REDACTED}
        assert run.output == result.data and run.usage["input_tokens"] > 0 and run.finished_at >= run.started_at
        (log,) = store.tool_logs(run_id=result.run_id)
        assert log["status"] == "success" and log["tool"] == "login" and json.loads(log["input"])["password"] == REDACTED
        assert isinstance(log["duration_ms"], float)
        assert store.model_exchanges(result.run_id)[0]["messages"]
    gap_free(url, result.run_id)


def test_a_failing_run_has_status_error_and_an_error_log(project: Path, url: str) -> None:
    seen: list[Event] = []
    engine = engine_on(project, url)
    result = engine.call_tool_sync("boom", {"message": "kaput"}, on_event=seen.append)
    engine.close()
    assert gap_free(url, result.run_id) == [(e.seq, e.type) for e in seen]
    with open_store(url) as store:
        run = store.run(result.run_id)
        assert run is not None and run.status == "error" and run.error["code"] == "execution_error"
        (log,) = store.tool_logs(tool="boom")
        assert log["status"] == "error" and "kaput" in log["error_message"]


def test_interleaved_concurrent_runs_keep_each_run_in_order(project: Path, url: str) -> None:
    engine = engine_on(project, url)

    async def main() -> list:
        return await asyncio.gather(*(engine.call_tool("report", {"text": f"a b {i}"}) for i in range(40)))

    results = asyncio.run(main())
    engine.close()
    for result in results:
        rows = gap_free(url, result.run_id)
        assert rows[0][1] == "tool_call_start" and rows[-1][1] == "tool_call_result"
    assert sql(url, "SELECT status, COUNT(*) FROM runs GROUP BY status") == [("ok", 40)]


def _event(run_id: str, seq: int, kind: str, **data: Any) -> Event:
    return Event(type=kind, run_id=run_id, seq=seq, ts=1_000 + seq, tool_call_id="call_1", data=data)


def test_query_api_filters_prefixes_owners_and_prune(url: str) -> None:
    with open_store(url) as store:
        for run_id, tool in (("run_ab_1", "report"), ("run_ab_2", "plan"), ("run_c", "report")):
            store.listener(_event(run_id, 1, "tool_call_start", tool=tool, arguments={}))
            store.listener(_event(run_id, 2, "tool_call_result", data={"n": 1}, metadata={}))
        store.record_owner("run_c", "alice")
        store.flush()
        assert [r.id for r in store.runs(tool="report")] == ["run_c", "run_ab_1"]
        assert [r.id for r in store.runs(principal="alice")] == ["run_c"] and store.run("run_c").principal == "alice"
        assert store.run("run_c").id == "run_c" and store.run("run_ab_2").name == "plan"
        with pytest.raises(StoreError, match="matches several runs"):
            store.run("run_ab")
        assert store.run("run_a_") is None and store.run("") is None
        assert len(store.tool_logs(tool="report")) == 2 and store.events("run_c", after_seq=1)[0]["seq"] == 2
        assert store.prune(0) == 3 and store.runs() == []


def test_a_batch_written_twice_changes_nothing(url: str) -> None:
    with open_store(url) as store:
        for _ in range(2):
            store.listener(_event("run_twice", 1, "tool_call_start", tool="report", arguments={}))
            store.listener(_event("run_twice", 2, "tool_call_result", data={}, metadata={}))
            store.flush()
        assert [e["seq"] for e in store.events("run_twice")] == [1, 2] and len(store.runs()) == 1


def test_a_lone_surrogate_in_one_run_loses_no_other_run(url: str) -> None:
    with open_store(url) as store:
        store.listener(_event("run_bad", 1, "tool_call_start", tool="report", arguments={"text": "a\ud800b"}))
        store.listener(_event("run_good", 1, "tool_call_start", tool="report", arguments={"text": "fine"}))
        store.flush()
        assert store.write_failures == {"lone_surrogate": 1}
        assert store.run("run_good").input == {"text": "fine"} and store.run("run_bad").input == {"text": "a\ufffdb"}


def test_tool_settings_live_in_the_store_and_another_store_hears_of_changes(project: Path, url: str) -> None:
    engine = engine_on(project, url)
    other = open_store(url)
    heard = threading.Event()
    other.on_tool_settings_changed(heard.set)
    mine = threading.Event()
    engine.store.on_tool_settings_changed(mine.set)  # type: ignore[union-attr]
    try:
        started = time.monotonic()
        ToolAdmin(engine).update("report", enabled=False)
        assert heard.wait(2), "the other store did not hear of the change"
        assert time.monotonic() - started < 1.5
        assert other.tool_settings()["report"] == ToolSetting("report", enabled=False)
        assert not engine.project.tools["report"].enabled
        time.sleep(0.7)  # a poll (SQLite) or a notice (PostgreSQL) would have come by now
        assert not mine.is_set(), "a store's own change woke its own listener"
        other.delete_tool_setting("report")
        assert not other.tool_settings()
        # an Engine relinks when another store changed its settings
        deadline = time.monotonic() + 2
        while not engine.project.tools["report"].enabled and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.project.tools["report"].enabled, "the engine did not relink after another store's change"
        assert mine.wait(2)
    finally:
        other.close()
        engine.close()


def test_notify_reaches_listeners_and_each_batch_announces_its_runs(url: str) -> None:
    writer, follower = open_store(url), open_store(url)
    try:
        got: list[tuple[float, str]] = []
        arrived = threading.Condition()

        def on_notice(payload: str) -> None:
            with arrived:
                got.append((time.perf_counter(), payload))
                arrived.notify_all()

        stop = follower.listen("custom", on_notice)
        follower.listen("skillyard_events", on_notice)
        writer.notify("custom", "hello")
        if url.startswith("sqlite"):  # in-process only: the writer's own listeners hear it
            writer.listen("custom", on_notice)
            writer.listen("skillyard_events", on_notice)
            writer.notify("custom", "hello")
        with arrived:
            assert arrived.wait_for(lambda: any(p == "hello" for _, p in got), 3)
        stop()
        latencies = []
        for i in range(1, 21):
            sent = time.perf_counter()
            writer.listener(_event("run_live", i, "tool_progress_delta", n=i))
            with arrived:
                assert arrived.wait_for(lambda i=i: any(p == f"run_live {i}" for _, p in got), 3), got[-3:]
            latencies.append(next(t for t, p in got if p == f"run_live {i}") - sent)
        median = statistics.median(latencies)
        print(f"{url.split(':')[0]}: event → listener median {median * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms")
        assert median < 0.1
    finally:
        writer.close()
        follower.close()


# ─── which store: SKILLYARD_STORE_URL > store.url > store.path ─────────────────────────


def test_the_store_url_comes_from_the_environment_then_store_url_then_store_path(tmp_path: Path) -> None:
    from engine.spec.models import StoreSettings
    from engine.store import store_url

    root = tmp_path / "p"
    assert store_url(root, StoreSettings(), {}) == f"sqlite:///{root.resolve()}/.skillyard/runs.db"
    configured = StoreSettings(path="a.db", url="sqlite:///data/b.db")
    assert store_url(root, configured, {}) == f"sqlite:///{root.resolve()}/data/b.db"
    assert store_url(root, configured, {"SKILLYARD_STORE_URL": "postgresql://u@h:5/db"}) == "postgresql://u@h:5/db"
    assert store_url(root, StoreSettings(url="sqlite:////abs/c.db"), {}) == "sqlite:////abs/c.db"
    with pytest.raises(StoreError, match="SKILLYARD_STORE_URL is 'mysql://u:\\*\\*\\*@h/db', not a store URL"):
        store_url(root, configured, {"SKILLYARD_STORE_URL": "mysql://u:pw@h/db"})


@pytest.mark.slow
def test_a_bad_store_url_is_a_clear_error_naming_its_place(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from store_support import cli

    (project / "config").mkdir(exist_ok=True)
    (project / "config" / "engine.yaml").write_text("store:\n  url: mysql://db/runs\n")
    done = cli("skillyard", "runs", "--dir", str(project))
    assert done.returncode == 2 and "engine.yaml:2" in done.stderr and "Traceback" not in done.stderr, done.stderr
    (project / "config" / "engine.yaml").write_text("store:\n  enabled: true\n")
    monkeypatch.setenv("SKILLYARD_STORE_URL", "redis://x")
    done = cli("run-workflow", "report", "--arg", "text=x", "--dir", str(project), "--quiet")
    assert done.returncode == 2 and "SKILLYARD_STORE_URL is 'redis://x', not a store URL" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_settings_change_elsewhere_that_cannot_be_read_keeps_the_current_tools(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The reload runs on a thread of its own: a store gone meanwhile is a log line, not a traceback."""
    engine = engine_on(project, f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        before = engine.project

        def unreachable() -> Any:
            raise StoreError("cannot read the run store: the server went away")

        monkeypatch.setattr(engine.store, "tool_settings", unreachable)
        engine._reload_from_store()  # what the notice's thread runs: it must return
        assert engine.project is before
    finally:
        engine.close()
    assert "could not be read" in capsys.readouterr().err
