"""A session's name is its owner's: two callers naming `ticket-19782` have two sessions, on both
stores (SQLite, and PostgreSQL in a throwaway cluster), over HTTP, and across the migration
that keyed sessions by owner (rows written before it keep their owner and messages).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.errors import SessionError
from engine.store import open_store
from engine.store.schema import MIGRATIONS, postgres_ddl
from fake_llm_servers import WIRES, FakeServer, write_project

NAME = "ticket-19782"
ALICE = "alice-key-0123456789abcdef0123456789ab"
BOB = "bob-key-0123456789abcdef0123456789abcd"
ROOT = "root-key-0123456789abcdef0123456789abc"
WIRE = WIRES["openai"]
OWNED = 14  # the migration that keyed sessions by (owner, name)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.db"
    return str(request.getfixturevalue("pg_cluster").new_database())


def _turn(sessions: Any, owner: str | None, run_id: str, text: str) -> list[dict[str, Any]]:
    history = sessions.begin(NAME, run_id, owner=owner)
    assert sessions.append(NAME, run_id, [{"role": "user", "content": text}], {"input_tokens": 1, "output_tokens": 2})
    return history


def test_two_owners_of_one_name_have_two_sessions(url: str) -> None:
    with open_store(url) as store:
        sessions = store.sessions
        assert _turn(sessions, "alice", "run_a1", "alice one") == []
        assert _turn(sessions, "bob", "run_b1", "bob one") == [], "bob's first turn starts bob's own session"
        assert _turn(sessions, None, "run_p1", "project one") == []
        assert _turn(sessions, "alice", "run_a2", "alice two") == [{"role": "user", "content": "alice one"}]

        sessions.begin(NAME, "run_b2", owner="bob")  # bob's turn holds bob's session, not alice's
        assert sessions.begin(NAME, "run_a3", owner="alice") != []
        with pytest.raises(SessionError) as busy:
            sessions.begin(NAME, "run_b3", owner="bob")
        assert busy.value.code == "session_busy"
        sessions.release(NAME, "run_b2")
        sessions.release(NAME, "run_a3")

        assert [m["content"] for m in sessions.get(NAME, owner="alice")["messages"]] == ["alice one", "alice two"]
        assert sessions.get(NAME, owner="bob")["runs"] == ["run_b1"]
        assert sessions.get(NAME, owner=None)["principal"] is None
        assert sorted(s["principal"] or "" for s in sessions.list()) == ["", "alice", "bob"]
        assert [s["principal"] for s in sessions.list(visible="bob")] == ["bob"]

        assert sessions.delete(NAME, owner="bob")
        assert sessions.get(NAME, owner="bob") is None and not sessions.delete(NAME, owner="bob")
        assert sessions.get(NAME, owner="alice")["turns"] == 2, "deleting bob's left alice's"


OLD_SESSION = "INSERT INTO sessions (id, principal, created_at, updated_at, turns, input_tokens, output_tokens) "


def _old_rows() -> list[tuple[str, tuple[Any, ...]]]:
    return [
        (OLD_SESSION + "VALUES (?, ?, 1, 2, 1, 3, 4)", (NAME, "alice")),
        (OLD_SESSION + "VALUES (?, ?, 1, 2, 1, 0, 0)", ("cli-chat", None)),
        ("INSERT INTO session_messages VALUES (?, 1, 1, 'run_old', ?)", (NAME, '{"role": "user", "content": "before"}')),
        ("INSERT INTO session_messages VALUES (?, 1, 1, 'run_cli', ?)", ("cli-chat", '{"role": "user", "content": "cli"}')),
    ]


def _old_store(url: str) -> None:
    """A store as the skillyard before owner-keyed sessions left it, with two sessions."""
    if url.startswith("sqlite:///"):
        connection = sqlite3.connect(url[len("sqlite:///"):])
        for migration in MIGRATIONS[: OWNED - 1]:
            connection.executescript(migration)
        connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        connection.execute("INSERT INTO schema_version VALUES (?)", (OWNED - 1,))
        for sql, params in _old_rows():
            connection.execute(sql, params)
        connection.commit()
        connection.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        for migration in MIGRATIONS[: OWNED - 1]:
            for statement in (part.strip() for part in postgres_ddl(migration).split(";")):
                if statement:
                    db.execute(statement)
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version VALUES (%s)", (OWNED - 1,))
        for sql, params in _old_rows():
            db.execute(sql.replace("?", "%s"), params)


def test_sessions_written_before_the_owner_key_keep_their_owner(url: str) -> None:
    _old_store(url)
    with open_store(url) as store:
        assert store.schema_version == len(MIGRATIONS)
        sessions = store.sessions
        kept = sessions.get(NAME, owner="alice")
        assert kept["usage"] == {"input_tokens": 3, "output_tokens": 4} and kept["runs"] == ["run_old"]
        assert sessions.get("cli-chat", owner=None)["messages"] == [{"role": "user", "content": "cli"}]
        assert sessions.get(NAME, owner="bob") is None
        assert _turn(sessions, "bob", "run_b1", "bob one") == []
        assert _turn(sessions, "alice", "run_a2", "after")[0]["content"] == "before"
        assert [m["content"] for m in sessions.get(NAME, owner="alice")["messages"]] == ["before", "after"]


# ─── over HTTP: both callers' POST /v1/agent with the same session_id are answered ───


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def app(tmp_path: Path, model_server: FakeServer) -> Iterator[Any]:
    from engine.server import create_app

    model_server.reset()
    root = write_project(tmp_path / "project", {"fake": WIRE.model_entry(model_server.url)})
    engine = Engine.from_dir(root, store=root / "runs.db")
    yield create_app(engine, api_keys=f"alice:caller:{ALICE},bob:caller:{BOB},root:admin:{ROOT}", mcp=False)
    engine.close()


def send(app: Any, method: str, url: str, key: str, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=20) as client:
            headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
            return await client.request(method, url, headers=headers, **kwargs)

    return asyncio.run(go())


def test_two_callers_naming_one_session_each_get_their_own(app: Any, model_server: FakeServer) -> None:
    model_server.script(WIRE.reply("for alice"), WIRE.reply("for bob"), WIRE.reply("alice again"))
    for key, text in ((ALICE, "alice here"), (BOB, "bob here"), (ALICE, "alice back")):
        answer = send(app, "POST", "/v1/agent", key, json={"messages": text, "session_id": NAME})
        assert answer.status_code == 200, answer.text
    assert [m["content"] for m in model_server.bodies[1]["messages"]] == ["bob here"], "bob sees none of alice's turn"
    assert [m["content"] for m in model_server.bodies[2]["messages"]] == ["alice here", "for alice", "alice back"]

    mine = send(app, "GET", f"/v1/sessions/{NAME}", BOB).json()
    assert mine["principal"] == "bob" and [m["content"] for m in mine["messages"]] == ["bob here", "for bob"]
    assert send(app, "GET", f"/v1/sessions/{NAME}?owner=alice", BOB).status_code == 404, "a caller names only itself"
    assert [s["principal"] for s in send(app, "GET", "/v1/sessions", BOB).json()] == ["bob"]
    assert send(app, "GET", "/v1/sessions", ROOT).json() == [], "an admin's list is its own conversations"
    assert sorted(s["principal"] for s in send(app, "GET", "/v1/sessions?all=true", ROOT).json()) == ["alice", "bob"]
    assert [s["principal"] for s in send(app, "GET", "/v1/sessions?owner=bob", ROOT).json()] == ["bob"]
    assert [s["principal"] for s in send(app, "GET", "/v1/sessions?all=true", BOB).json()] == ["bob"], "a caller's all is its own"
    assert send(app, "GET", f"/v1/sessions/{NAME}?owner=alice", ROOT).json()["turns"] == 2
    assert send(app, "DELETE", f"/v1/sessions/{NAME}", BOB).status_code == 204
    assert send(app, "GET", f"/v1/sessions/{NAME}", ALICE).json()["turns"] == 2, "bob deleted only his own"
