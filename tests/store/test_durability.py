"""An answered run is a recorded run (issue 30 §1), in process.

With `store.durability: committed` (the default) a call's answer — the JSON body, the last SSE
frame, the MCP result — goes out only once the run's events up to its end are committed; with
`relaxed` it does not wait. To tell the two apart without timing luck, the writer's tick is made
30 s long (`FLUSH_INTERVAL_S`): the writer then commits only when something wakes it. An answer
that waits wakes it; one that does not finds nothing committed. Whether the run is committed is
read back through the store's queries, which open a connection of their own (a second reader of
the SQLite file sees only committed transactions). The app runs in process (httpx's ASGITransport).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sqlite3
import textwrap
import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

import engine.store.sqlite as sqlite_module  # noqa: E402
import engine.store.writer as writer_module  # noqa: E402
from engine import ConfigError, Engine  # noqa: E402
from engine.link.linker import load_project  # noqa: E402

FILES = {
    "tools.yaml": """
        tools:
          echo:
            description: Return the text it was given.
            type: python
            config: {function: "durability_tools:echo"}
            parameters:
              type: object
              properties: {text: {type: string}}
              required: [text]
    """,
    "durability_tools.py": """
        def echo(text: str) -> dict:
            return {"echo": text}
    """,
}
PROTOCOL = "2025-11-25"


def write_project(root: Path, durability: str | None = None) -> Path:
    files = dict(FILES)
    files["config/engine.yaml"] = "store:\n  path: runs.db\n" + (f"  durability: {durability}\n" if durability else "")
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture
def slow_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer commits only when woken (its tick is 30 s): nothing is committed by chance."""
    monkeypatch.setattr(writer_module, "FLUSH_INTERVAL_S", 30.0)


@contextlib.asynccontextmanager
async def served(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    from engine.server import create_app

    app = create_app(engine)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=30) as client:
            yield client


def recorded_events(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    """The run's committed events (a connection of the store's own reads the file)."""
    assert engine.store is not None
    return engine.store.events(run_id)


def assert_whole(engine: Engine, run_id: str) -> None:
    """The run is committed: finished `ok`, its events 1…n, ending with its result."""
    assert engine.store is not None
    run = engine.store.run(run_id)
    assert run is not None and run.status == "ok", f"the answered run {run_id} is not committed: {run}"
    events = recorded_events(engine, run_id)
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "tool_call_result"


def test_json_and_sse_answers_wait_for_the_commit(tmp_path: Path, slow_writer: None) -> None:
    engine = Engine.from_dir(write_project(tmp_path), store=True)

    async def main() -> None:
        async with served(engine) as client:
            answer = await client.post("/v1/tools/echo/call", json={"text": "json"})
            assert answer.status_code == 200, answer.text
            assert_whole(engine, answer.json()["run_id"])
            streamed = await client.post("/v1/tools/echo/call", json={"text": "sse"},
                                         headers={"Accept": "text/event-stream"})
            assert streamed.status_code == 200 and "tool_call_result" in streamed.text
            assert_whole(engine, streamed.headers["x-run-id"])

    try:
        asyncio.run(main())
    finally:
        engine.close()


def test_calls_that_end_together_share_commits(tmp_path: Path, slow_writer: None) -> None:
    """50 calls at once: each answered once its run is committed, in far fewer commits than calls."""
    engine = Engine.from_dir(write_project(tmp_path), store=True)
    assert engine.store is not None
    database = engine.store.database
    commits: list[int] = []
    write_rows = database.write_rows

    def counted(rows: Any, side: Any = ()) -> Any:
        commits.append(1)
        return write_rows(rows, side)

    database.write_rows = counted  # type: ignore[method-assign]

    async def main() -> None:
        async with served(engine) as client:
            answers = await asyncio.gather(*(client.post("/v1/tools/echo/call", json={"text": f"t{n}"}) for n in range(50)))
            for answer in answers:
                assert answer.status_code == 200
                assert_whole(engine, answer.json()["run_id"])

    try:
        asyncio.run(main())
    finally:
        engine.close()
    assert 1 <= len(commits) <= 25, f"{len(commits)} commits for 50 calls: answers do not share commits"


def test_owners_share_the_events_commit(tmp_path: Path, slow_writer: None) -> None:
    """Who started a run (a side write) goes in the transaction of the run's events: an answer
    costs one commit, not two, and is released with its owner row committed."""
    engine = Engine.from_dir(write_project(tmp_path), store=True)
    assert engine.store is not None
    database = engine.store.database
    transactions: list[str] = []
    write_rows, write_side = database.write_rows, database.write_side

    def rows_counted(rows: Any, side: Any = ()) -> Any:
        transactions.append("rows")
        return write_rows(rows, side)

    def side_counted(statements: Any) -> Any:
        transactions.append("side")
        return write_side(statements)

    database.write_rows, database.write_side = rows_counted, side_counted  # type: ignore[method-assign]

    async def main() -> None:
        async with served(engine) as client:
            answers = await asyncio.gather(*(client.post("/v1/tools/echo/call", json={"text": f"t{n}"}) for n in range(20)))
            for answer in answers:
                assert answer.status_code == 200
                run_id = answer.json()["run_id"]
                assert_whole(engine, run_id)
                assert database.fetch("SELECT principal FROM run_owners WHERE run_id = ?", (run_id,)), run_id

    try:
        asyncio.run(main())
    finally:
        engine.close()
    assert "side" not in transactions and transactions, transactions


def test_answers_of_one_turn_of_the_loop_wake_the_writer_once(tmp_path: Path, slow_writer: None) -> None:
    """Answers asking for their commit in the same turn of the event loop wake the writer once,
    after that turn: they share one spill and one commit (each wake could start a commit of its own)."""
    engine = Engine.from_dir(write_project(tmp_path), store=True)
    store = engine.store
    assert store is not None
    wakes: list[int] = []
    wake = store.writer.wake

    def counted() -> None:
        wakes.append(1)
        wake()

    store.writer.wake = counted  # type: ignore[method-assign]

    async def main() -> None:
        futures = [store.committed() for _ in range(20)]
        assert all(future is not None for future in futures)
        await asyncio.wait_for(asyncio.gather(*futures), 10)  # (the writer's tick is 30 s: only a wake commits)
        assert len(wakes) == 1, f"{len(wakes)} wakes for 20 answers of one turn"
        await asyncio.wait_for(store.committed(), 10)  # a later turn wakes it again
        assert len(wakes) == 2

    try:
        asyncio.run(main())
    finally:
        engine.close()


def checkpointed_runs(tmp_path: Path, database: Path) -> int:
    """How many runs the database file itself holds, without its WAL (what checkpoints copied)."""
    alone = tmp_path / "alone" / "runs.db"
    alone.parent.mkdir(exist_ok=True)
    shutil.copyfile(database, alone)
    with contextlib.closing(sqlite3.connect(alone)) as db:
        try:
            return int(db.execute("SELECT count(*) FROM runs").fetchone()[0])
        except sqlite3.OperationalError:  # no table yet: not even the schema was checkpointed
            return 0
        except sqlite3.DatabaseError:  # copied while a checkpoint wrote pages: a torn copy, not a torn file
            return -1


@pytest.mark.parametrize("rows", [10**9, 50])
def test_commits_do_not_wait_for_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    """A checkpoint syncs the file to disk: answers waiting for a commit must not wait for one
    too. The writer's commits never checkpoint (SQLite's would, past 1,000 pages of WAL: this
    writes ~2,000); a thread of its own does, every CHECKPOINT_ROWS rows (10**9: not while
    the process runs)."""
    monkeypatch.setattr(sqlite_module, "CHECKPOINT_ROWS", rows)
    monkeypatch.setattr(sqlite_module, "CHECKPOINT_S", 3600 if rows == 10**9 else 0.05)
    engine = Engine.from_dir(write_project(tmp_path), store=True)
    assert engine.store is not None
    try:
        for n in range(400):
            assert asyncio.run(engine.call_tool("echo", {"text": f"{n} " + "x" * 20_000})).ok
        engine.store.flush()
        deadline = time.monotonic() + 10
        while rows < 10**9 and checkpointed_runs(tmp_path, tmp_path / "runs.db") < 400 and time.monotonic() < deadline:
            time.sleep(0.05)
        in_file = checkpointed_runs(tmp_path, tmp_path / "runs.db")
    finally:
        engine.close()
    assert in_file == (0 if rows == 10**9 else 400), in_file


def test_mcp_result_waits_for_the_commit(tmp_path: Path, slow_writer: None) -> None:
    pytest.importorskip("mcp")
    engine = Engine.from_dir(write_project(tmp_path), store=True)
    assert engine.store is not None

    async def main() -> None:
        async with served(engine) as client:
            headers = {"Accept": "application/json, text/event-stream"}
            opened = await client.post("/mcp", headers=headers, json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
            assert opened.status_code == 200, opened.text
            headers |= {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
            await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            answer = await client.post("/mcp", headers=headers, json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "mcp"}}})
            assert answer.status_code == 200 and '"isError":false' in answer.text.replace(" ", ""), answer.text
            runs = engine.store.runs(tool="echo")  # type: ignore[union-attr]
            assert len(runs) == 1, "the MCP result went out before its run was committed"
            assert_whole(engine, runs[0].id)

    try:
        asyncio.run(main())
    finally:
        engine.close()


def test_relaxed_answers_do_not_wait(tmp_path: Path, slow_writer: None) -> None:
    engine = Engine.from_dir(write_project(tmp_path, "relaxed"), store=True)
    assert engine.store is not None

    async def main() -> str:
        async with served(engine) as client:
            answer = await client.post("/v1/tools/echo/call", json={"text": "relaxed"})
            assert answer.status_code == 200
            run_id: str = answer.json()["run_id"]
            assert engine.store.run(run_id) is None, "relaxed: the answer waited for the commit"  # type: ignore[union-attr]
            assert recorded_events(engine, run_id) == []
            return run_id

    try:
        run_id = asyncio.run(main())
        engine.store.flush()  # written behind: there after the next commit
        assert_whole(engine, run_id)
    finally:
        engine.close()


def test_a_bad_durability_is_a_load_error_at_its_line(tmp_path: Path) -> None:
    write_project(tmp_path, "fast")
    with pytest.raises(ConfigError) as raised:
        load_project(tmp_path)
    text = "\n".join(map(str, raised.value.issues))
    assert "engine.yaml:3" in text and "durability" in text, text
    assert "committed" in text and "relaxed" in text, text
    assert json.dumps(text)  # one plain message, no traceback
