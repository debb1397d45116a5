"""`/readyz` (issue 28, item 11): the status for anyone — what a load balancer needs — and the
figures (live runs, tool counts, store failures) only for an admin key, or for loopback when the
server runs without keys. In process, at the root and mounted, on a real project and a real
SQLite run store (made to fail by a trigger, to see what a 503 tells whom).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402

from engine import Engine  # noqa: E402
from engine.link.linker import load_project  # noqa: E402
from server_helpers import write_project  # noqa: E402

ADMIN_KEY = "ops-admin-key-0123456789abcdef0123"
CALLER_KEY = "alice-caller-key-0123456789abcdef01"
KEYS = f"ops:admin:{ADMIN_KEY},alice:caller:{CALLER_KEY}"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
CALLER = {"Authorization": f"Bearer {CALLER_KEY}"}
FIGURES = {"status", "tools", "broken_tools", "live_runs", "store", "store_write_failures", "auth"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_project(tmp_path)


def _served(engine: Any, keys: str, prefix: str) -> Any:
    from engine.server import create_app

    app = create_app(engine, api_keys=keys, mcp=False)
    return Starlette(routes=[Mount(prefix, app=app)]) if prefix else app


def _get_all(app: Any, requests: list[tuple[str, str, dict[str, str]]]) -> list[httpx.Response]:
    """The requests in order, on one event loop; a POST calls `echo`."""
    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http:
            return [await http.request(method, url, headers=headers, json={"name": "x"} if method == "POST" else None)
                    for method, url, headers in requests]

    return asyncio.run(go())


@pytest.mark.parametrize("prefix", ["", "/skillyard"])
def test_without_an_admin_key_readyz_shows_only_the_status(root: Path, prefix: str) -> None:
    engine = Engine.from_dir(root, store=True)
    app = _served(engine, KEYS, prefix)

    async def go() -> tuple[dict[str, Any], list[httpx.Response]]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http:
            call = asyncio.ensure_future(http.post(f"{prefix}/v1/tools/slow/call", json={"seconds": 2}, headers=CALLER))
            deadline = asyncio.get_running_loop().time() + 10
            while (figures := (await http.get(f"{prefix}/readyz", headers=ADMIN)).json())["live_runs"] == 0:
                assert asyncio.get_running_loop().time() < deadline, "the slow call never became live"
                await asyncio.sleep(0.02)
            others = [await http.get(f"{prefix}/readyz", headers=headers)
                      for headers in ({}, {"Authorization": "Bearer " + "w" * 32}, CALLER)]
            assert (await call).json()["ok"]
            return figures, others

    try:
        figures, others = asyncio.run(go())
    finally:
        engine.close()
    for answer in others:  # never 401: a load balancer sends no key
        assert answer.status_code == 200 and answer.json() == {"status": "ready"}, answer.text
    assert set(figures) == FIGURES and figures["status"] == "ready"
    assert figures["live_runs"] == 1 and figures["tools"] == 4 and figures["store"] is True and figures["auth"] is True


def test_degraded_is_public_and_its_count_is_not(root: Path) -> None:
    workflows = root / "workflows.yaml"
    workflows.write_text(workflows.read_text().replace("$toolArgs.seconds", "$toolArgs.secnds"))  # `slow` breaks
    engine = Engine.from_project(load_project(root, isolate_broken_tools=True))  # as `serve` loads it
    try:
        anonymous, admin = _get_all(_served(engine, KEYS, "/api"), [("GET", "/api/readyz", {}), ("GET", "/api/readyz", ADMIN)])
    finally:
        engine.close()
    assert anonymous.json() == {"status": "degraded"}
    assert admin.json()["status"] == "degraded" and admin.json()["broken_tools"] == 1


def test_a_store_that_fails_is_503_for_anyone_and_says_where_only_to_an_admin(root: Path) -> None:
    engine = Engine.from_dir(root, store=True)
    assert engine.store is not None
    where = str(engine.store.where)
    engine.store.flush()
    with sqlite3.connect(root / ".skillyard" / "runs.db") as db:  # every new run's row is refused from now on
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'the disk is on fire'); END")
    call = ("POST", "/v1/tools/echo/call", CALLER)
    try:
        # a write failure is reported once: a call before each look
        _, anonymous, _, admin = _get_all(_served(engine, KEYS, ""), [
            call, ("GET", "/readyz", {}), call, ("GET", "/readyz", ADMIN)])
    finally:
        engine.close()
    assert anonymous.status_code == 503 and anonymous.json()["error"]["code"] == "store_unavailable"
    assert where not in anonymous.text and "fire" not in anonymous.text
    assert admin.status_code == 503 and where in admin.json()["error"]["message"] and "fire" in admin.text


def test_without_keys_loopback_is_the_admin_and_sees_the_figures(root: Path) -> None:
    """The keyless mode serves loopback as the admin `local`: the figures, as before."""
    engine = Engine.from_dir(root)
    try:
        (ready,) = _get_all(_served(engine, "", "/skillyard"), [("GET", "/skillyard/readyz", {})])
    finally:
        engine.close()
    assert set(ready.json()) == FIGURES and ready.json()["auth"] is False
