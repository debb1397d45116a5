"""The run store shared by several processes, and a process killed in the middle of a run.

Real subprocesses on one real database file in a temp directory.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from engine.store import RunStore
from store_support import assert_gap_free, python_process, query, wait_for, write_project

pytestmark = pytest.mark.slow  # every test here starts a process or a server

PROCESSES = 8
CALLS_PER_PROCESS = 4

# One parent imports the engine once (imports dominate a process's start-up), then forks eight
# worker processes. Each worker waits for the go (so that all eight open the new database file
# and write at the same moment), opens its own Engine and store, and makes several calls, two
# at a time. The parent holds no store and no thread when it forks.
WORKERS = """
import asyncio, json, os, sys, time, traceback
from pathlib import Path
from engine import Engine

project, db, out, processes, pairs = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
go = out / "go"


def work(index):
    while not go.exists():
        time.sleep(0.002)
    engine = Engine.from_dir(project, store=db)
    seen = {}

    def count(event):
        seen[event.run_id] = seen.get(event.run_id, 0) + 1

    async def main():
        results = []
        for i in range(pairs):
            results += await asyncio.gather(
                engine.call_tool("report", {"text": f"worker {index} call {i}"}, on_event=count),
                engine.call_tool("plan", {"topic": f"topic {index} {i}"}, on_event=count),
            )
        return results

    results = asyncio.run(main())
    engine.close()
    calls = [{"run_id": r.run_id, "ok": r.ok, "tool": r.tool, "events": seen[r.run_id], "pid": os.getpid()} for r in results]
    (out / f"worker{index}.json").write_text(json.dumps(calls))


pids = []
for index in range(processes):
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            work(index)
        except BaseException:
            (out / f"worker{index}.err").write_text(traceback.format_exc())
            code = 1
        os._exit(code)
    pids.append(pid)
go.touch()
failed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
sys.exit(1 if failed else 0)
"""


def test_runs_from_eight_processes_are_all_recorded_gap_free(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    db = tmp_path / "shared" / "runs.db"  # does not exist yet: the eight processes create it together
    out = tmp_path / "out"
    out.mkdir()
    parent = python_process(WORKERS, str(project), str(db), str(out), str(PROCESSES), str(CALLS_PER_PROCESS // 2))
    try:
        _, err = parent.communicate(timeout=120)
    finally:
        if parent.poll() is None:
            parent.kill()
    errors = "\n".join(path.read_text() for path in out.glob("*.err"))
    assert parent.returncode == 0, err + errors

    calls = [call for path in sorted(out.glob("worker*.json")) for call in json.loads(path.read_text())]
    assert len(calls) == PROCESSES * CALLS_PER_PROCESS and all(call["ok"] for call in calls)
    assert len({call["pid"] for call in calls}) == PROCESSES
    assert query(db, "SELECT COUNT(*), COUNT(DISTINCT pid) FROM runs") == [(len(calls), PROCESSES)]
    for call in calls:
        rows = assert_gap_free(db, call["run_id"])
        assert len(rows) == call["events"], "every event the process saw is stored"
        assert rows[0][1] == "tool_call_start" and rows[-1][1] == "tool_call_result"
        ((status, finished, started, name, pid),) = query(
            db, "SELECT status, finished_at, started_at, name, pid FROM runs WHERE id = ?", (call["run_id"],))
        assert status == "ok" and finished is not None and finished >= started
        assert name == call["tool"] and pid == call["pid"]
    assert query(db, "SELECT COUNT(*) FROM tool_logs WHERE status = 'success'") == [(len(calls),)]
    assert query(db, "SELECT COUNT(*) FROM model_exchanges") == [(len(calls) // 2,)]  # one per plan call


def _rows(db: Path, sql: str) -> list[tuple]:
    """The rows, or none while the file or its tables do not exist yet."""
    try:
        return query(db, sql) if db.exists() else []
    except sqlite3.OperationalError:
        return []


KILLED = """
import sys
from engine import Engine

engine = Engine.from_dir(sys.argv[1], store=sys.argv[2])
engine.call_tool_sync("slow", {"seconds": 60})
"""


def test_a_process_killed_mid_run_leaves_a_store_that_marks_the_run_interrupted(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    db = tmp_path / "runs.db"
    child = python_process(KILLED, str(project), str(db))
    try:
        # The python skill is sleeping once its progress event is in the file.
        wait_for(lambda: _rows(db, "SELECT run_id FROM events WHERE type = 'skill_progress_delta'"), timeout=60)
        (run_id,) = query(db, "SELECT id FROM runs WHERE status = 'running'")[0]
        with RunStore(db) as store:  # opening while the process lives leaves its run alone
            assert store.interrupted == 0 and store.run(run_id).status == "running"  # type: ignore[union-attr]
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)  # reaped: a zombie would still look alive
    assert child.returncode == -signal.SIGKILL

    with RunStore(db) as store:
        assert store.interrupted == 1
        run = store.run(run_id)
        assert run is not None and run.status == "interrupted" and run.name == "slow"
        events = store.events(run_id)
        assert run.finished_at == events[-1]["ts"], "finished at its last recorded event"
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert store.runs(status="interrupted")[0].id == run_id
    with RunStore(db) as store:
        assert store.interrupted == 0, "marked once"
