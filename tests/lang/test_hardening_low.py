"""Low findings of the security review (issue 28): items 7, 8, 9 and 12.

7. a `when:` nested thousands of levels deep is a load error at its line (validate, admin reload);
8. a batch dataset line nested thousands of levels deep is a usage error at its line (exit 2);
9. `/v1/agent` refuses lone UTF-16 surrogates in any string it takes (422, naming the field);
12. a `kill -9`ed process not yet reaped (a zombie keeps its pid) has its runs interrupted by
    its heartbeat's age, while a live process's runs are left alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from engine.cli.main import main
from engine.store import RunStore
from engine.store import sqlite as sqlite_store
from server_helpers import write_project
from store_support import python_process, query, wait_for
from store_support import write_project as write_store_project

BATCH_PROJECT = Path(__file__).resolve().parents[1] / "projects" / "batch"
DEEP = 3_000


def _with_deep_when(root: Path, depth: int = DEEP) -> int:
    """Give the `echo` step of the server test project a `when:` nested `depth` levels; its line."""
    workflows = root / "workflows.yaml"
    text = workflows.read_text()
    condition = "(" * depth + "$toolArgs.count == 1" + ")" * depth
    text = text.replace("        skill: echo\n", f"        skill: echo\n        when: '{condition}'\n", 1)
    workflows.write_text(text)
    return text.splitlines().index(f"        when: '{condition}'") + 1


def _asgi(app: Any, method: str, url: str, **kwargs: Any) -> Any:
    import httpx

    async def go() -> Any:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(go())


def _no_traceback_logged(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err, err[-2000:]
    assert not [record for record in caplog.records if record.exc_info], "no exception was logged"
    return err


# ─── item 7: a deep condition ────────────────────────────────────────────────────────────


def test_validate_reports_a_deep_condition_at_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "project")
    line = _with_deep_when(root)
    assert main(["validate", str(root)]) == 2
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "Traceback" not in out and "RecursionError" not in out
    assert f"workflows.yaml:{line}:" in out and "nested more than 64 levels deep" in out, out[-2000:]
    assert "see the condition language in docs/workflows.md" in out  # the fix, as every load error has


def test_a_condition_of_64_levels_still_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path / "project")
    _with_deep_when(root, 64)
    assert main(["validate", str(root)]) == 0, capsys.readouterr()


def test_admin_reload_answers_a_deep_condition_with_its_line_not_a_500(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("fastapi")
    from engine import Engine
    from engine.server import create_app

    root = write_project(tmp_path / "project")
    engine = Engine.from_dir(root)
    try:
        app = create_app(engine, api_keys="", mcp=False)
        line = _with_deep_when(root)
        caplog.set_level(logging.DEBUG)
        answer = _asgi(app, "POST", "/v1/admin/reload")
        assert answer.status_code in (200, 422), answer.text[:2000]
        problem = f"workflows.yaml:{line}:"
        found = [text for text in answer.json().get("problems", answer.json().get("error", {}).get("details", {}).get("issues", []))
                 if problem in text]
        assert found and "nested more than 64 levels deep" in found[0], answer.text[:2000]
        _no_traceback_logged(capsys, caplog)
    finally:
        engine.close()


@pytest.mark.parametrize("text, limited", [
    ("not " * 65 + "true", True),
    ("len(" * 65 + "$toolArgs.tags" + ")" * 65 + " > 0", True),
    ("$toolArgs.n in " + "[" * 65 + "]" * 65, True),
    ("not " * 3_000 + "true", True),
    ("$toolArgs.n == " + "1" * 5_000, False),  # more digits than int() reads
], ids=["not", "len", "list", "not-3000", "long-number"])
def test_conditions_too_deep_or_too_long_are_syntax_errors(text: str, limited: bool) -> None:
    from engine.lang.conditions import Condition, ConditionSyntaxError

    with pytest.raises(ConditionSyntaxError) as caught:
        Condition(text)
    assert ("nested more than 64 levels deep" if limited else "too long to read") in str(caught.value)


# ─── item 8: a deep dataset line ─────────────────────────────────────────────────────────


@pytest.mark.parametrize("name, text", [
    ("deep.jsonl", '{"text": "a"}\n{"text": ' + "[" * 5_000 + "]" * 5_000 + "}\n"),  # past the recursion limit
    ("d300.jsonl", '{"text": "a"}\n{"text": ' + "[" * 300 + "]" * 300 + "}\n"),  # past the case limit, below it
    ("deep.yaml", "- text: a\n- text: " + "[" * 5_000 + "]" * 5_000 + "\n"),
    ("deep.csv", 'text,delay\na,\nb,"' + "[" * 5_000 + "]" * 5_000 + '"\n'),  # a JSON cell
    ("expect.csv", 'text,expect\na,\nb,"' + "[" * 5_000 + "]" * 5_000 + '"\n'),
], ids=lambda value: value if len(value) < 20 else "")
def test_a_deep_dataset_line_is_a_usage_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    data = tmp_path / name
    data.write_text(text)
    code = main(["batch", "measure", "--data", str(data), "--dir", str(BATCH_PROJECT), "--no-store",
                 "--out", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert f"{data}:{2 if name.endswith(('.jsonl', '.yaml')) else 3}: nested more than 256 levels deep" in err, err[-2000:]
    assert "Traceback" not in err and not (tmp_path / "out.jsonl").exists()


def test_a_dataset_line_within_the_case_limit_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """255 levels under the case: a batch may still check that the router refuses them."""
    data = tmp_path / "deep.jsonl"
    data.write_text('{"arguments": {"text": ' + "[" * 254 + "]" * 254 + '}, "expect": {"error": "invalid_arguments"}}\n')
    code = main(["batch", "measure", "--data", str(data), "--dir", str(BATCH_PROJECT), "--no-store",
                 "--out", str(tmp_path / "out.jsonl")])
    assert code == 0, capsys.readouterr().err[-2000:]


@pytest.mark.parametrize("name, text, line", [
    ("long.jsonl", '{"text": "a"}\n{"text": ' + "1" * 5_000 + "}\n", 2),
    ("long.yaml", "- text: a\n- text: " + "1" * 5_000 + "\n", 2),
    ("long.csv", 'text,expect\na,\nb,"{""equals"": ' + "1" * 5_000 + '}"\n', 3),
], ids=["jsonl", "yaml", "csv-expect"])
def test_a_number_too_long_for_python_is_a_usage_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, line: int
) -> None:
    data = tmp_path / name
    data.write_text(text)
    assert main(["batch", "measure", "--data", str(data), "--dir", str(BATCH_PROJECT), "--no-store",
                 "--out", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{data}:{line}: a number has more digits" in err and "Traceback" not in err, err[-2000:]


# ─── item 9: lone surrogates in an agent request ─────────────────────────────────────────


@pytest.fixture
def agent_app(tmp_path: Path) -> Any:
    pytest.importorskip("fastapi")
    from engine import Engine
    from engine.server import create_app

    engine = Engine.from_dir(write_project(tmp_path / "project"))
    yield create_app(engine, api_keys="", mcp=False)
    engine.close()


# JSON text (a lone surrogate can only travel escaped), and the field each one must be named by
@pytest.mark.parametrize("body, field", [
    ('{"messages": "x \\ud800"}', "/messages"),
    ('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x \\udfff y"}]}',
     "/messages/1/content"),
    ('{"messages": "hi", "system": "be \\ud83d brief"}', "/system"),
    ('{"messages": "hi", "model": "mock\\ud800"}', "/model"),
    ('{"messages": "hi", "tools": ["echo", "e\\ud800"]}', "/tools/1"),
    ('{"messages": "hi", "tool_choice": "echo\\ud800"}', "/tool_choice"),
], ids=lambda value: value if value.startswith("/") else "")
@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
def test_agent_refuses_a_lone_surrogate_in_any_string_naming_it(
    agent_app: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, body: str, field: str, accept: str
) -> None:
    caplog.set_level(logging.DEBUG)
    answer = _asgi(agent_app, "POST", "/v1/agent", content=body, headers={"Content-Type": "application/json", "Accept": accept})
    assert answer.status_code == 422, answer.text[:1000]
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert f"{field}: the text holds a lone UTF-16 surrogate" in error["message"], error
    assert error["details"]["errors"][0]["pointer"] == field
    _no_traceback_logged(capsys, caplog)


def test_agent_still_takes_a_valid_surrogate_pair(agent_app: Any) -> None:
    answer = _asgi(agent_app, "POST", "/v1/agent", content='{"messages": "hello \\ud83d\\ude00"}',
                   headers={"Content-Type": "application/json", "Accept": "application/json"})
    assert answer.status_code == 200 and answer.json()["stop_reason"] == "answer", answer.text[:1000]


# ─── item 12: a killed process whose pid lives on as a zombie ────────────────────────────

# The victim writes its heartbeat every 0.1 s (the default: every 2 s) and sleeps in a run.
VICTIM = """
import sys
import engine.store.sqlite as sqlite_store
from engine import Engine

sqlite_store.HEARTBEAT_S = 0.1
engine = Engine.from_dir(sys.argv[1], store=sys.argv[2])
engine.call_tool_sync("slow", {"seconds": 120})
"""
TIMEOUT_MS = 2_000  # the test's PROCESS_TIMEOUT_MS (the default: 8 s)


def _start_victim(tmp_path: Path) -> tuple[Any, Path, str]:
    project = write_store_project(tmp_path / "project")
    db = tmp_path / "runs.db"
    child = python_process(VICTIM, str(project), str(db))
    rows = wait_for(lambda: _rows(db, "SELECT run_id FROM events WHERE type = 'skill_progress_delta'"), timeout=60)
    return child, db, rows[0][0]


def _rows(db: Path, sql: str) -> list[tuple]:
    import sqlite3

    try:
        return query(db, sql) if db.exists() else []
    except sqlite3.OperationalError:
        return []


def _kill_leaving_a_zombie(child: Any) -> None:
    """SIGKILL, and no wait(): the pid stays taken (a zombie) until the test reaps it."""
    os.kill(child.pid, signal.SIGKILL)
    stat = Path(f"/proc/{child.pid}/stat")
    if stat.exists():
        wait_for(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", timeout=10)
    os.kill(child.pid, 0)  # the pid still answers: `os.kill(pid, 0)` alone takes it for alive


@pytest.mark.slow
def test_a_zombies_runs_are_interrupted_once_its_heartbeat_is_old_and_a_live_ones_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "PROCESS_TIMEOUT_MS", TIMEOUT_MS)
    child, db, run_id = _start_victim(tmp_path)
    try:
        # Alive for longer than the timeout: its fresh heartbeat keeps its run.
        wait_for(lambda: query(db, "SELECT started_at FROM runs WHERE id = ?", (run_id,))[0][0] < time.time() * 1000 - TIMEOUT_MS - 200,
                 timeout=10)
        with RunStore(db) as store:
            assert store.interrupted == 0 and store.run(run_id).status == "running"  # type: ignore[union-attr]

        killed = time.monotonic()
        _kill_leaving_a_zombie(child)
        time.sleep(max(0.0, killed + TIMEOUT_MS / 1000 + 0.1 - time.monotonic()))  # its last heartbeat is older still
        with RunStore(db) as store:
            assert store.interrupted == 1
            run = store.run(run_id)
            assert run is not None and run.status == "interrupted" and run.finished_at == store.events(run_id)[-1]["ts"]
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)


@pytest.mark.slow
def test_a_store_opened_right_after_the_kill_interrupts_the_runs_when_the_heartbeat_ages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service restarted a second after a crash: its store's writer notices the stale heartbeat."""
    monkeypatch.setattr(sqlite_store, "PROCESS_TIMEOUT_MS", TIMEOUT_MS)
    monkeypatch.setattr(sqlite_store, "HEARTBEAT_S", 0.1)
    child, db, run_id = _start_victim(tmp_path)
    try:
        _kill_leaving_a_zombie(child)
        with RunStore(db) as store:
            killed = time.monotonic()
            wait_for(lambda: store.run(run_id).status == "interrupted", timeout=TIMEOUT_MS / 1000 + 10)  # type: ignore[union-attr]
            assert time.monotonic() - killed < TIMEOUT_MS / 1000 + 5
            assert query(db, "SELECT COUNT(*) FROM processes WHERE pid = ?", (os.getpid(),)) == [(1,)]  # its own lease
        assert query(db, "SELECT COUNT(*) FROM processes WHERE pid = ?", (os.getpid(),)) == [(0,)], "a clean close leaves"
    finally:
        child.communicate(timeout=30)
