"""The PostgreSQL store as several processes share it: 4 processes writing 500 runs at once,
the CLI through SKILLYARD_STORE_URL, tool settings changed by one process applying in the
others within 1 s, a database that cannot be reached (at open, and mid-run: nothing is lost),
and psycopg never imported for the default SQLite store.

A throwaway cluster (tests/pg_cluster.py); the outage tests stop and start one of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from engine import Engine
from engine.runtime.events import Event
from engine.store import StoreError, open_store, writer
from pg_cluster import PgCluster, find_bin
from store_support import REPO, cli, python_process, write_project

pytestmark = pytest.mark.slow  # every test here starts a process or a server

ENV = "SKILLYARD_STORE_URL"


def _sql(url: str, query: str, params: tuple = ()) -> list[tuple]:
    import psycopg

    with psycopg.connect(url) as db:
        return [tuple(row) for row in db.execute(query, params).fetchall()]


@pytest.fixture
def url(pg_cluster: PgCluster) -> str:
    return pg_cluster.new_database()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project")


# ─── several processes ────────────────────────────────────────────────────────────────

WRITERS = """
import asyncio, json, os, sys, time, traceback
from pathlib import Path
from engine import Engine

project, url, out, processes, runs = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def work(index):
    while not (out / "go").exists():
        time.sleep(0.002)
    engine = Engine.from_dir(project, store=url)

    async def main():
        return await asyncio.gather(*(engine.call_tool("report", {"text": f"p{index} r{i}"}) for i in range(runs)))

    results = asyncio.run(main())
    engine.store.flush()
    engine.close()
    (out / f"w{index}.json").write_text(json.dumps([[r.run_id, r.ok] for r in results]))


pids = []
for index in range(processes):
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            work(index)
        except BaseException:
            (out / f"w{index}.err").write_text(traceback.format_exc())
            code = 1
        os._exit(code)
    pids.append(pid)
(out / "go").touch()
sys.exit(1 if [pid for pid in pids if os.waitpid(pid, 0)[1] != 0] else 0)
"""


def test_four_processes_write_500_runs_at_once_gap_free(project: Path, url: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    parent = python_process(WRITERS, str(project), url, str(out), "4", "125")
    try:
        _, err = parent.communicate(timeout=180)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert parent.returncode == 0, err + "\n".join(p.read_text() for p in out.glob("*.err"))
    calls = [call for path in out.glob("w*.json") for call in json.loads(path.read_text())]
    assert len(calls) == 500 and all(ok for _, ok in calls)
    assert _sql(url, "SELECT count(*), count(DISTINCT pid), min(status), max(status) FROM runs") == [(500, 4, "ok", "ok")]
    shapes = _sql(url, "SELECT run_id, min(seq), max(seq), count(*) FROM events GROUP BY run_id")
    assert len(shapes) == 500 and all(low == 1 and high == count for _, low, high, count in shapes), "a gap or a duplicate"
    assert _sql(url, "SELECT count(*) FROM tool_logs WHERE status = 'success'") == [(500,)]


def test_the_cli_reads_runs_and_logs_and_changes_tools_through_the_url(project: Path, url: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, url)
    done = cli("run-workflow", "report", "--arg", "text=hello there", "--dir", str(project), "--quiet")
    assert done.returncode == 0, done.stderr
    assert not (project / ".skillyard").exists(), "the SQLite default was used instead of the URL"
    listed = cli("skillyard", "runs", "--dir", str(project), "--json")
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert run["name"] == "report" and run["status"] == "ok"
    shown = cli("skillyard", "runs", "show", run["id"][:20], "--dir", str(project))
    assert shown.returncode == 0 and "report" in shown.stdout, shown.stderr
    logs = cli("skillyard", "logs", "--dir", str(project), "--json")
    assert logs.returncode == 0 and json.loads(logs.stdout)[0]["tool"] == "report", logs.stderr
    disabled = cli("skillyard", "tools", "disable", "report", "--dir", str(project))
    assert disabled.returncode == 0, disabled.stderr
    assert _sql(url, "SELECT name, enabled FROM tool_settings") == [("report", 0)]
    refused = cli("run-workflow", "report", "--arg", "text=again", "--dir", str(project), "--quiet")
    assert refused.returncode != 0 and "disabled" in (refused.stdout + refused.stderr)


WATCHER = """
import sys, time
from engine import Engine

engine = Engine.from_dir(sys.argv[1], store=sys.argv[2])
assert engine.project.tools["report"].enabled
print("ready", flush=True)
deadline = time.time() + 30
while engine.project.tools["report"].enabled and time.time() < deadline:
    time.sleep(0.005)
print(time.time(), flush=True)
engine.close()
"""


def test_a_tool_disabled_by_one_process_is_disabled_in_the_others_within_a_second(project: Path, url: str) -> None:
    Engine.from_dir(project, store=url).close()  # the schema exists before the watchers start
    watchers = [python_process(WATCHER, str(project), url) for _ in range(2)]
    try:
        for watcher in watchers:
            assert watcher.stdout is not None and watcher.stdout.readline().strip() == "ready", watcher.stderr.read()  # type: ignore[union-attr]
        done = _disable(project, url)  # `skillyard tools disable report`, a third process
        assert done.returncode == 0, done.stderr
        ((changed_ms,),) = _sql(url, "SELECT updated_at FROM tool_settings WHERE name = 'report'")
        for watcher in watchers:
            out, err = watcher.communicate(timeout=30)
            seen = float(out.strip())
            assert seen - changed_ms / 1000 < 1.0, f"applied {seen - changed_ms / 1000:.2f}s after the change; {err}"
    finally:
        for watcher in watchers:
            if watcher.poll() is None:
                watcher.kill()


def _disable(project: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ENV: url, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))",
                           "tools", "disable", "report", "--dir", str(project)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


# ─── a database that cannot be reached ─────────────────────────────────────────────────


def test_an_unreachable_database_is_a_clear_error_without_its_password(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pg_cluster import _free_port

    down = f"postgresql://ann:Pw-s3cret-9@127.0.0.1:{_free_port()}/runs"
    with pytest.raises(StoreError) as caught:
        open_store(down)
    assert "postgresql://ann:***@127.0.0.1" in str(caught.value) and "Pw-s3cret-9" not in str(caught.value)
    monkeypatch.setenv(ENV, down)
    for argv in (["skillyard", "runs", "--dir", str(project)],
                 ["run-workflow", "report", "--arg", "text=x", "--dir", str(project), "--quiet"]):
        done = cli(*argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert "cannot open the run store postgresql://ann:***@127.0.0.1" in done.stderr
        assert "Pw-s3cret-9" not in done.stdout + done.stderr and "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[PgCluster]:
    """A cluster these tests may stop and start."""
    bindir = find_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (no initdb); .ci/run installs Debian's postgresql package")
    cluster = PgCluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


def _events(run_id: str, first: int, last: int) -> list[Event]:
    return [Event(type="tool_progress_delta", run_id=run_id, seq=seq, ts=seq, data={"n": seq}) for seq in range(first, last + 1)]


def test_while_the_database_is_down_events_are_kept_and_arrive_when_it_is_back(own_cluster: PgCluster, project: Path) -> None:
    url = own_cluster.new_database()
    engine = Engine.from_dir(project, store=url)
    store = engine.store
    assert store is not None
    try:
        before = engine.call_tool_sync("report", {"text": "before"})
        store.flush()
        own_cluster.stop()
        during = engine.call_tool_sync("report", {"text": "during the outage"})  # the call does not wait for the store
        assert during.ok
        for event in _events("run_manual", 1, 50):
            store.listener(event)
        started = time.monotonic()
        with pytest.raises(StoreError, match="cannot be reached.*kept"):
            store.flush(timeout=20)
        assert time.monotonic() - started < 15, "flush() should say at once that the database is down"
        own_cluster.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                store.flush(timeout=20)
                break
            except StoreError:
                assert time.monotonic() < deadline, "the events never arrived after the restart"
                time.sleep(0.2)
        assert store.write_failures == {}
        assert [e["seq"] for e in store.events("run_manual")] == list(range(1, 51))
        for result in (before, during):
            run = store.run(result.run_id)
            assert run is not None and run.status == "ok", result.run_id
            seqs = [e["seq"] for e in store.events(result.run_id)]
            assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 3
    finally:
        engine.close()


def test_past_the_bound_kept_events_are_counted_and_logged_once(own_cluster: PgCluster, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    url = own_cluster.new_database()
    store = open_store(url)
    monkeypatch.setattr(writer, "MAX_PENDING_EVENTS", 100)
    try:
        own_cluster.stop()
        for first in range(1, 1001, 100):
            for event in _events("run_flood", first, first + 99):
                store.listener(event)
            with pytest.raises(StoreError):
                store.flush(timeout=20)
        assert 800 <= store.write_failures.get("unavailable", 0) <= 900
        own_cluster.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                store.flush(timeout=20)
                break
            except StoreError as exc:
                if "were not recorded" in str(exc):
                    continue  # the drop is reported once
                assert time.monotonic() < deadline
                time.sleep(0.2)
        kept = [e["seq"] for e in store.events("run_flood")]
        assert kept == list(range(1001 - len(kept), 1001)) and 100 <= len(kept) <= 200, "the newest are kept, in order"
    finally:
        store.close()
    assert capsys.readouterr().err.count("unavailable") == 1


def test_psycopg_is_not_imported_for_the_default_store(project: Path) -> None:
    code = ("import sys; from engine import Engine; e = Engine.from_dir(sys.argv[1], store=True); "
            "e.call_tool_sync('report', {'text': 'x'}); e.close(); print('psycopg' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, str(project)], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={k: v for k, v in os.environ.items() if k != ENV})
    assert done.stdout.strip() == "False", done.stderr
    assert (project / ".skillyard" / "runs.db").exists()


# ─── runs that execute elsewhere (Temporal): never swept, adopted once ─────────────────


def test_a_dead_process_s_runs_on_temporal_are_not_interrupted_but_adopted_once(url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from engine.store import postgres

    def start(store: postgres.PostgresStore, run_id: str) -> None:
        store.listener(Event("tool_call_start", run_id, 1, 1_000, "call_1", None, None, {"tool": "t", "arguments": {}}))

    with open_store(url) as writer:
        for run_id in ("run_local", "run_remote_1", "run_remote_2"):
            start(writer, run_id)
        writer.record_executor("run_remote_1", "temporal")
        writer.record_executor("run_remote_2", "temporal")
        writer.flush()
        assert writer.executor("run_remote_1") == "temporal" and writer.executor("run_local") is None
    # the writer "died" long ago: its rows name a process whose heartbeat is old
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE runs SET pid = 999999")
        db.execute("INSERT INTO processes (id, host, pid, heartbeat_at) SELECT 'gone', host, 999999, 0 FROM runs LIMIT 1")
    with open_store(url) as first, open_store(url) as second:  # their writers heartbeat, and sweep
        deadline = time.monotonic() + 10
        while _sql(url, "SELECT status FROM runs WHERE id = 'run_local'") == [("running",)] and time.monotonic() < deadline:
            time.sleep(0.1)
        statuses = dict(_sql(url, "SELECT id, status FROM runs"))
        assert statuses == {"run_local": "interrupted", "run_remote_1": "running", "run_remote_2": "running"}
        # the sweep at open ran before the writers' first heartbeat; an adopter adopts only while its own is fresh
        while not _sql(url, f"SELECT 1 FROM processes WHERE pid = {os.getpid()}") and time.monotonic() < deadline + 10:
            time.sleep(0.05)
        with ThreadPoolExecutor(2) as pool:  # two adopters at once: each run is taken by one
            taken = list(pool.map(lambda store: store.adopt_orphans("temporal"), (first, second)))
        ids = sorted(run_id for found in taken for run_id, _, _ in found)
        assert ids == ["run_remote_1", "run_remote_2"]
        assert first.adopt_orphans("temporal") == [] == second.adopt_orphans("temporal")  # their adopters live
        owners = dict(_sql(url, "SELECT id, pid FROM runs WHERE id <> 'run_local'"))
        assert set(owners.values()) == {os.getpid()}
        assert first.interrupt("run_remote_1", "its execution is gone") is True
        assert first.interrupt("run_remote_1", "again") is False  # ended already
        assert first.run("run_remote_1").error == {"code": "interrupted", "message": "its execution is gone"}
        assert first.prune(0) == 2  # the two ended runs, with their executor rows
        assert _sql(url, "SELECT run_id FROM run_executors") == [("run_remote_2",)]
