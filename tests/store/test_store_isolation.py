"""One bad event never costs other runs theirs (issue 10 §5), and the store file is private (§4).

Today a batch that cannot be encoded (a lone surrogate in a tool's output) is dropped whole:
every run whose events shared the batch is lost. Here many concurrent runs share one real
SQLite file with one run whose data cannot be stored as it is; every other run must be there,
the bad row repaired or replaced by a note, and the failure counted by kind.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Engine
from engine.runtime.events import Event
from engine.store import RunStore, StoreError
from engine.store import sqlite as store_sqlite
from store_support import assert_gap_free, query

PROJECT = {
    "tools.yaml": """
tools:
  ok:
    description: Return the number it was given.
    parameters: {type: object, properties: {n: {type: integer}}, required: [n]}
    workflow: ok
  odd:
    description: Return data that no UTF-8 encoder or JSON reader takes as it is.
    parameters: {type: object, properties: {kind: {type: string}}, required: [kind]}
    workflow: odd
""",
    "skills.yaml": """
skills:
  give:
    kind: python
    function: odd_skills:give
    input: {type: object, properties: {n: {type: integer}}, required: [n]}
  odd:
    kind: python
    function: odd_skills:odd
    input: {type: object, properties: {kind: {type: string}}, required: [kind]}
""",
    "workflows.yaml": """
workflows:
  ok:
    steps: [{id: give, skill: give, input: {n: $toolArgs.n}}]
  odd:
    steps: [{id: odd, skill: odd, input: {kind: $toolArgs.kind}}]
""",
    "odd_skills.py": '''
def give(input):
    return {"n": input["n"]}


def odd(input):
    if input["kind"] == "surrogate":
        return {"text": "page title \\ud800 end"}
    if input["kind"] == "big":
        return {"text": "x" * 400_000}
    return {"n": 10 ** 5000}
''',
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for name, text in PROJECT.items():
        (root / name).write_text(text.lstrip("\n"), encoding="utf-8")
    return root


def _many_runs_and_one_odd(project: Path, db: Path, kind: str) -> tuple[list, object, dict[str, int]]:
    engine = Engine.from_dir(project, store=db)

    async def main() -> list:
        calls = [engine.call_tool("ok", {"n": i}) for i in range(30)]
        calls.append(engine.call_tool("odd", {"kind": kind}))
        calls += [engine.call_tool("ok", {"n": i}) for i in range(30, 60)]
        return await asyncio.gather(*calls)

    results = asyncio.run(main())
    assert engine.store is not None
    failures = getattr(engine.store, "write_failures", {})  # (main: no such counter; the runs are what fails)
    engine.close()
    odd = results.pop(30)
    return results, odd, failures


def _assert_every_ok_run_is_recorded(db: Path, results: list) -> None:
    assert len(results) == 60 and all(r.ok for r in results)
    for result in results:
        rows = assert_gap_free(db, result.run_id)
        kinds = [t for _, t in rows]
        assert kinds[0] == "tool_call_start" and "skill_result" in kinds and kinds[-1] == "tool_call_result", kinds
    assert query(db, "SELECT COUNT(*) FROM runs WHERE name = 'ok' AND status = 'ok'") == [(60,)]


def test_a_lone_surrogate_in_one_runs_data_loses_no_other_run(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    results, odd, failures = _many_runs_and_one_odd(project, db, "surrogate")
    _assert_every_ok_run_is_recorded(db, results)
    # the odd run is there too, its text marked where the surrogate was
    assert query(db, "SELECT status FROM runs WHERE id = ?", (odd.run_id,)) == [("ok",)]
    (output,) = query(db, "SELECT output FROM runs WHERE id = ?", (odd.run_id,))[0]
    assert "page title \ufffd end" in output
    assert failures.get("lone_surrogate", 0) >= 1 and "write" not in failures


def test_data_no_json_writer_takes_becomes_a_note_and_loses_no_other_run(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    results, odd, failures = _many_runs_and_one_odd(project, db, "huge")  # 10**5000: too long for json.dumps
    _assert_every_ok_run_is_recorded(db, results)
    assert odd.ok
    notes = query(db, "SELECT data FROM events WHERE run_id = ? AND data LIKE '%not_recorded%'", (odd.run_id,))
    assert notes, "the odd event is stored as a note"
    assert failures.get("unencodable", 0) >= 1 and "write" not in failures


def _event(run: str, data: dict) -> Event:
    return Event("tool_progress_delta", run, 1, 1, "call_" + run, data=data)


def test_a_store_fed_by_hand_repairs_only_the_bad_rows_and_flush_reports_lost_data(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db", redacted_events=True)
    for run, data in (("run_a", {"m": "fine"}), ("run_b", {"n": 10**5000}), ("run_c", {"m": "x\udc00y"}), ("run_d", {"m": "ok"})):
        store.listener(_event(run, data))
    with pytest.raises(StoreError, match="could not be stored"):
        store.flush()
    stored = dict(query(tmp_path / "runs.db", "SELECT run_id, data FROM events"))
    assert stored.keys() == {"run_a", "run_b", "run_c", "run_d"}
    assert "not_recorded" in stored["run_b"] and "x\ufffdy" in stored["run_c"]
    assert store.write_failures == {"unencodable": 1, "lone_surrogate": 1}
    store.close()


def test_data_too_deep_to_redact_becomes_a_note(tmp_path: Path) -> None:
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with RunStore(tmp_path / "runs.db") as store:
        store.listener(_event("run_a", {"deep": deep}))
        store.listener(_event("run_b", {"m": "fine"}))
        with pytest.raises(StoreError, match="could not be stored"):
            store.flush()
        assert store.write_failures == {"unencodable": 1}
    assert query(tmp_path / "runs.db", "SELECT run_id FROM events ORDER BY run_id") == [("run_a",), ("run_b",)]


@pytest.mark.slow
def test_write_failures_are_logged_once_per_kind(project: Path, tmp_path: Path) -> None:
    script = (
        "import sys, asyncio\n"
        "from engine import Engine\n"
        "from engine.logging import configure_logging\n"
        "configure_logging('json', 'info')\n"
        "engine = Engine.from_dir(sys.argv[1], store=sys.argv[2])\n"
        "async def main():\n"
        "    await asyncio.gather(*(engine.call_tool('odd', {'kind': 'surrogate'}) for _ in range(20)))\n"
        "asyncio.run(main())\n"
        "engine.store.flush()\n"
        "print(engine.store.write_failures['lone_surrogate'])\n"
        "engine.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(project), str(tmp_path / "runs.db")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 20  # each run's skill_result (and its result, carrying the same text)
    assert (done.stdout + done.stderr).count("events not written as they were") == 1, done.stderr


# ─── §4: the file and its WAL are private ────────────────────────────────────────────────


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_store_file_and_its_wal_and_shm_are_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        db = tmp_path / "store" / "runs.db"
        store = RunStore(db)
        store.listener(Event("tool_progress_delta", "run_a", 1, 1, "call_a", data={"message": "m"}))
        store.flush()
        for path in (db, db.with_name("runs.db-wal"), db.with_name("runs.db-shm")):
            assert path.exists() and _mode(path) == 0o600, (path, oct(_mode(path)))
        store.close()
    finally:
        os.umask(old)


def test_an_existing_store_readable_by_others_is_narrowed_to_0600(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    RunStore(db).close()
    for suffix in ("", "-wal", "-shm"):
        path = db.with_name(db.name + suffix)
        path.touch()
        os.chmod(path, 0o644)
    with RunStore(db) as store:
        for suffix in ("", "-wal", "-shm"):
            assert _mode(db.with_name(db.name + suffix)) == 0o600, suffix
        assert store.runs() == []
    assert store_sqlite.FILE_MODE == 0o600
