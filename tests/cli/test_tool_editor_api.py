"""Tools edited through the admin API (issue 32 §3): title and order, created/updated times,
PUT replacing a tool whole (validated as tools.yaml is, errors by field), "reset to YAML",
a draft tested without being stored; the round trip create → call → edit → call → reset.

In process: the service app through httpx's ASGITransport, a real SQLite store.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, Awaitable, Callable

import httpx
import pytest

from engine import Engine
from engine.store import open_store
from engine.store.schema import MIGRATIONS

pytest.importorskip("fastapi")

TOOLS = """
tools:
  shout:
    description: Upper-case a text.
    type: python
    config: {function: "editor_api_helpers:shout"}
  late:
    description: Listed last.
    title: Late one
    order: 5
    type: python
    config: {function: "editor_api_helpers:shout"}
"""
HELPERS = """
def shout(text: str) -> str:
    return text.upper()

def whisper(text: str) -> str:
    return text.lower()

def twice(text: str, times: int = 2) -> str:
    return text * times
"""
TEXT_PARAMETERS = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
                   "additionalProperties": False}


def write_project(root: Path, *, allow_code: bool = True) -> Path:
    (root / "tools.yaml").write_text(TOOLS)
    (root / "editor_api_helpers.py").write_text(HELPERS)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "engine.yaml").write_text(f"server:\n  allow_code_tools: {str(allow_code).lower()}\n")
    return root


def with_client(root: Path, body: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    from engine.server import create_app

    engine = Engine.from_dir(root, store=True)
    app = create_app(engine, api_keys="", mcp=False)  # no keys: the admin `local`

    async def main() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as client:
            return await body(client)

    try:
        return asyncio.run(main())
    finally:
        engine.close()


async def call(client: httpx.AsyncClient, tool: str, args: dict[str, Any]) -> Any:
    answer = await client.post(f"/v1/tools/{tool}/call", json=args)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def test_the_round_trip_create_call_edit_call_reset(tmp_path: Path) -> None:
    async def body(client: httpx.AsyncClient) -> None:
        created = await client.post("/v1/admin/tools", json={
            "name": "echo", "type": "python", "description": "Say it twice.", "title": "Echo", "order": 1,
            "config": {"function": "editor_api_helpers:twice"}, "parameters": TEXT_PARAMETERS})
        assert created.status_code == 201, created.text
        assert created.json()["title"] == "Echo" and created.json()["created_at"] > 0
        assert await call(client, "echo", {"text": "ab"}) == "abab"
        # edit: PUT replaces the stored tool whole
        edited = await client.put("/v1/admin/tools/echo", json={
            "type": "python", "description": "Whisper it.", "title": "Quiet echo", "order": 1,
            "config": {"function": "editor_api_helpers:whisper"}, "parameters": TEXT_PARAMETERS, "confirm": False, "enabled": True})
        assert edited.status_code == 200, edited.text
        view = edited.json()
        assert (view["title"], view["description"], view["source"]) == ("Quiet echo", "Whisper it.", "store")
        assert view["updated_at"] >= view["created_at"]
        assert await call(client, "echo", {"text": "AbC"}) == "abc"
        # a YAML tool overridden, then reset to its YAML
        put = await client.put("/v1/admin/tools/shout", json={
            "title": "Shout (quiet)", "order": 0, "config": {"function": "editor_api_helpers:whisper"}})
        assert put.status_code == 200, put.text
        assert put.json()["overrides"]["title"] == "Shout (quiet)"
        assert await call(client, "shout", {"text": "AbC"}) == "abc"
        patched = await client.patch("/v1/admin/tools/shout", json={"enabled": False})  # PATCH keeps what PUT set
        assert (patched.json()["title"], patched.json()["enabled"]) == ("Shout (quiet)", False)
        await client.patch("/v1/admin/tools/shout", json={"enabled": True})
        assert await call(client, "shout", {"text": "AbC"}) == "abc"
        reset = await client.delete("/v1/admin/tools/shout/override")
        assert reset.status_code == 200, reset.text
        assert reset.json()["title"] is None and reset.json()["overrides"] == {} and reset.json()["created_at"] is None
        assert await call(client, "shout", {"text": "AbC"}) == "ABC"
        # a stored tool has no YAML to reset to; it can be deleted
        assert (await client.delete("/v1/admin/tools/echo/override")).json()["error"]["code"] == "read_only"
        assert (await client.delete("/v1/admin/tools/echo")).status_code == 204
        assert (await client.get("/v1/admin/tools/echo")).status_code == 404

    with_client(write_project(tmp_path), body)


def test_lists_follow_order_then_name_and_show_title_and_times(tmp_path: Path) -> None:
    async def body(client: httpx.AsyncClient) -> tuple[list[Any], list[Any], list[Any]]:
        await client.post("/v1/admin/tools", json={"name": "aardvark", "type": "python", "description": "First by name.",
                                                   "config": {"function": "editor_api_helpers:shout"}, "order": 9})
        listed = (await client.get("/v1/admin/tools")).json()
        mcp = (await client.get("/v1/tools?format=mcp")).json()
        openai = (await client.get("/v1/tools?format=openai")).json()
        return listed, mcp, openai

    listed, mcp, openai = with_client(write_project(tmp_path), body)
    assert [t["name"] for t in listed] == ["shout", "late", "aardvark"]  # order 0, 5, 9
    assert [t["name"] for t in mcp] == ["shout", "late", "aardvark"]
    assert mcp[1]["title"] == "Late one" and "title" not in mcp[0]  # MCP's display title
    assert "title" not in openai[1]["function"]  # the model sees the name
    by_name = {t["name"]: t for t in listed}
    assert by_name["aardvark"]["created_at"] > 0 and by_name["late"]["created_at"] is None
    assert by_name["late"]["title"] == "Late one" and by_name["late"]["order"] == 5


def test_put_is_checked_as_tools_yaml_is_with_errors_by_field(tmp_path: Path) -> None:
    async def body(client: httpx.AsyncClient) -> list[dict[str, Any]]:
        answers = []
        for fields in (
            {"type": "python", "description": "x", "order": "first", "config": {"function": "editor_api_helpers:shout"}},
            {"type": "python", "description": "x", "config": {"function": "editor_api_helpers:nope"}},
            {"type": "python", "description": "x", "config": {"function": "editor_api_helpers:shout"}, "parameters": {"type": "string"}},
            {"type": "fetch", "description": "x"},
        ):
            answer = await client.put("/v1/admin/tools/shout", json=fields)
            assert answer.status_code == 422, answer.text
            answers.append(answer.json()["error"])
        unknown = await client.put("/v1/admin/tools/nothing", json={"type": "python", "description": "x"})
        assert unknown.status_code == 404
        assert await call(client, "shout", {"text": "a"}) == "A"  # nothing was applied
        return answers

    order, function, parameters, type_change = with_client(write_project(tmp_path), body)
    assert list(order["details"]["fields"]) == ["order"] and order["code"] == "invalid_config"
    assert list(function["details"]["fields"]) == ["config.function"], function
    assert "nope" in function["details"]["fields"]["config.function"][0]
    assert list(parameters["details"]["fields"]) == ["parameters"]
    assert list(type_change["details"]["fields"]) == ["type"]


def test_a_draft_is_tested_without_being_stored(tmp_path: Path) -> None:
    async def body(client: httpx.AsyncClient) -> None:
        draft = {"name": "draft1", "tool": {"type": "python", "description": "Draft.", "config": {"function": "editor_api_helpers:twice"},
                                            "confirm": True, "enabled": False},
                 "arguments": {"text": "x", "times": 3}}
        answer = await client.post("/v1/admin/tools/test", json=draft)
        assert answer.status_code == 200, answer.text
        assert answer.json()["ok"] and answer.json()["data"] == "xxx"
        assert (await client.get("/v1/admin/tools/draft1")).status_code == 404  # not stored
        # a draft of an existing YAML tool: the running one is untouched
        answer = await client.post("/v1/admin/tools/test", json={"name": "shout", "tool": {"config": {"function": "editor_api_helpers:whisper"}},
                                                                 "arguments": {"text": "AB"}})
        assert answer.json()["data"] == "ab"
        assert await call(client, "shout", {"text": "ab"}) == "AB"
        bad = await client.post("/v1/admin/tools/test", json={"name": "d", "tool": {"type": "python", "description": "x",
                                                              "config": {"function": "editor_api_helpers:nope"}}})
        assert bad.status_code == 422 and "config.function" in bad.json()["error"]["details"]["fields"]
        failing = await client.post("/v1/admin/tools/test", json={**draft, "arguments": {"times": 2}})
        assert failing.status_code == 200 and failing.json()["ok"] is False  # the call's own refusal, reported

    with_client(write_project(tmp_path), body)


def test_code_running_types_stay_off_without_allow_code_tools(tmp_path: Path) -> None:
    async def body(client: httpx.AsyncClient) -> tuple[Any, Any, Any, Any]:
        types = (await client.get("/v1/admin/tool-types")).json()
        draft = await client.post("/v1/admin/tools/test", json={"name": "sh", "tool": {"type": "python", "description": "x",
                                                                "config": {"function": "os:getcwd"}}})
        put = await client.put("/v1/admin/tools/shout", json={"config": {"function": "os:getcwd"}})
        retitled = await client.put("/v1/admin/tools/shout", json={"title": "Loud"})  # no new code: allowed
        return types, draft, put, retitled

    types, draft, put, retitled = with_client(write_project(tmp_path, allow_code=False), body)
    assert [t["name"] for t in types] == ["fetch"] and "properties" in types[0]["config_schema"]
    assert draft.status_code == 403 and draft.json()["error"]["code"] == "code_tools_disabled"
    assert put.status_code == 403
    assert retitled.status_code == 200 and retitled.json()["title"] == "Loud"


def test_a_store_of_schema_11_gains_the_new_columns(tmp_path: Path) -> None:
    """Migration 12 on a store written before it: its tool settings read back unchanged."""
    db = tmp_path / "runs.db"
    connection = sqlite3.connect(db, isolation_level=None)
    for migration in MIGRATIONS[:11]:
        for statement in (part.strip() for part in migration.split(";")):
            if statement and not statement.startswith("--"):
                connection.execute(statement)
            elif statement.startswith("--"):
                body = statement.split("\n", 1)[1] if "\n" in statement else ""
                if body.strip():
                    connection.execute(body)
    connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    connection.execute("INSERT INTO schema_version VALUES (11)")
    connection.execute("INSERT INTO tool_settings (name, type, description, enabled, config, created_at, updated_at) "
                       "VALUES ('old', 'fetch', 'Old one', 1, '{\"timeout\": 5}', 1000, 2000)")
    connection.close()
    store = open_store(f"sqlite:///{db}")
    try:
        old = store.tool_settings()["old"]
    finally:
        store.close()
    assert (old.type, old.description, old.enabled, old.config) == ("fetch", "Old one", True, {"timeout": 5})
    assert (old.title, old.order, old.parameters, old.confirm, old.config_whole) == (None, None, None, None, False)
    assert (old.created_at, old.updated_at) == (1000, 2000)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.db"
    url = str(request.getfixturevalue("pg_url"))
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:  # one database per module: empty its settings
        if db.execute("SELECT to_regclass('tool_settings')").fetchone()[0] is not None:
            db.execute("TRUNCATE tool_settings")
    return url


def test_every_field_of_a_stored_tool_reads_back_on_both_backends(store_url: str) -> None:
    from engine.store.tool_settings import ToolSetting

    setting = ToolSetting("t", "fetch", "Docs.", False, {"timeout": 5}, "Docs reader", -3, TEXT_PARAMETERS, True, False)
    override = ToolSetting("y", None, None, None, {}, None, None, None, False, True)
    store = open_store(store_url)
    try:
        store.write_tool_setting(setting)
        store.write_tool_setting(override)
        first = store.tool_settings()["t"]
        store.write_tool_setting(setting)  # again: created_at stays, updated_at moves on
        again = store.tool_settings()
    finally:
        store.close()
    assert again == {"t": setting, "y": override}
    assert again["t"].created_at == first.created_at and again["t"].updated_at >= first.updated_at
