"""The service mounted in another ASGI app or served under a root path (issue 28, item 1).

Embedded as docs/server.md shows it — `parent.mount("/skillyard", create_app(engine, api_keys=…))`
— or behind `uvicorn --root-path /api`, the request's `path` carries the prefix while the router
matches without it. `Access` must judge the path the router matches, or every key check is
skipped; and a route that finds no principal must refuse, never act as the admin `local`.

In process (httpx's ASGITransport; its `root_path` sets the ASGI scope's `root_path` as uvicorn's
`--root-path` does, with the prefix kept in `path`), on a real project with metrics and MCP on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any, AsyncIterator, Callable
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402

from engine import Engine  # noqa: E402
from engine.tool_admin import ToolAdmin  # noqa: E402
from server_helpers import parse_sse, write_project  # noqa: E402

ADMIN_KEY = "ops-admin-key-0123456789abcdef0123"
CALLER_KEY = "alice-caller-key-0123456789abcdef01"
KEYS = f"ops:admin:{ADMIN_KEY},alice:caller:{CALLER_KEY}"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
CALLER = {"X-API-Key": CALLER_KEY}
WRONG = {"Authorization": "Bearer " + "w" * 32}

MCP_INIT = {
    "json": {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    "headers": {"Accept": "application/json, text/event-stream"},
}

# (method, route path, request arguments, admin only): one of each route family behind a key
PROTECTED: list[tuple[str, str, dict[str, Any], bool]] = [
    ("GET", "/v1/whoami", {}, False),
    ("GET", "/v1/tools", {}, False),
    ("POST", "/v1/tools/echo/call", {"json": {"name": "x"}}, False),
    ("POST", "/v1/agent", {"json": {"messages": "hello"}}, False),
    ("GET", "/v1/runs", {}, False),
    ("GET", "/v1/batches", {}, False),
    ("PATCH", "/v1/admin/tools/echo", {"json": {"enabled": False}}, True),
    ("POST", "/v1/admin/reload", {}, True),
    ("GET", "/metrics", {}, True),
    ("POST", "/mcp", MCP_INIT, False),
]


def _mount(prefix: str) -> Callable[[Any], Any]:
    return lambda app: Starlette(routes=[Mount(prefix, app=app)])


def _fastapi_mount(app: Any) -> Any:
    parent = FastAPI()
    parent.mount("/skillyard", app)
    return parent


def _nested(app: Any) -> Any:
    return Starlette(routes=[Mount("/outer", app=Starlette(routes=[Mount("/skillyard", app=app)]))])


# name: (wrap the service app, the transport's root_path, the prefix a client puts before route paths)
LAYOUTS: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    "starlette-mount": (_mount("/skillyard"), "", "/skillyard"),
    "fastapi-mount": (_fastapi_mount, "", "/skillyard"),
    "root-path": (lambda app: app, "/api", "/api"),
    "nested-mounts": (_nested, "", "/outer/skillyard"),
    "root-path-and-mount": (_fastapi_mount, "/api", "/api/skillyard"),
}


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    root = write_project(tmp_path)
    settings = root / "config" / "engine.yaml"
    settings.write_text(settings.read_text() + "telemetry:\n  metrics: true\n")  # GET /metrics
    engine = Engine.from_dir(root, store=True)  # tool settings (PATCH) live in the run store
    yield engine
    engine.close()


@contextlib.asynccontextmanager
async def _client(engine: Any, layout: str, keys: str = KEYS, *,
                  client: tuple[str, int] = ("127.0.0.1", 5000)) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A client of the service as `layout` embeds it, with the service's lifespan running (as
    docs/server.md asks of a parent), and the prefix to put before route paths."""
    from engine.server import create_app

    wrap, root_path, prefix = LAYOUTS[layout]
    service = create_app(engine, api_keys=keys)
    transport = httpx.ASGITransport(app=wrap(service), root_path=root_path, client=client)
    async with service.router.lifespan_context(service):
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=30) as http:
            yield http, prefix


def _refused(answer: httpx.Response, status: int, code: str) -> bool:
    return answer.status_code == status and answer.json()["error"]["code"] == code


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_embedded_every_route_family_refuses_a_missing_or_wrong_key_and_a_callers_key_on_admin_routes(
        engine: Any, layout: str) -> None:
    async def go() -> None:
        async with _client(engine, layout) as (http, prefix):
            for method, path, kwargs, admin_only in PROTECTED:
                headers = kwargs.get("headers", {})
                arguments = {k: v for k, v in kwargs.items() if k != "headers"}
                none = await http.request(method, prefix + path, headers=headers, **arguments)
                assert _refused(none, 401, "unauthorized"), (path, none.status_code, none.text[:200])
                assert none.headers["www-authenticate"] == "Bearer"
                wrong = await http.request(method, prefix + path, headers={**headers, **WRONG}, **arguments)
                assert _refused(wrong, 401, "unauthorized") and "not valid" in wrong.json()["error"]["message"], path
                if admin_only:
                    caller = await http.request(method, prefix + path, headers={**headers, **CALLER}, **arguments)
                    assert _refused(caller, 403, "forbidden"), (path, caller.status_code)
            tools = (await http.get(prefix + "/v1/admin/tools", headers=ADMIN)).json()
            assert {t["name"]: t["enabled"] for t in tools}["echo"] is True  # the refused PATCH changed nothing

    asyncio.run(go())


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_embedded_each_key_is_its_own_principal_and_runs_are_owned_by_it(engine: Any, layout: str) -> None:
    async def go() -> None:
        async with _client(engine, layout) as (http, prefix):
            assert (await http.get(prefix + "/v1/whoami", headers=CALLER)).json() == {
                "name": "alice", "role": "caller", "auth": True}
            assert (await http.get(prefix + "/v1/whoami", headers=ADMIN)).json()["name"] == "ops"
            call = await http.post(prefix + "/v1/tools/echo/call", json={"name": "Ada"}, headers=CALLER)
            assert call.status_code == 200 and call.json()["data"] == {"name": "Ada", "count": 1}
            run = (await http.get(f"{prefix}/v1/runs/{call.headers['x-run-id']}", headers=ADMIN)).json()
            assert run["principal"] == "alice"
            agent = await http.post(prefix + "/v1/agent", json={"messages": "hello"}, headers=CALLER)
            assert agent.status_code == 200 and parse_sse(agent.text)[-1]["event"] == "agent_done"
            mine = (await http.get(prefix + "/v1/runs", headers=CALLER)).json()
            assert [r.get("principal") for r in mine] == ["alice", "alice"], mine
            patched = await http.patch(prefix + "/v1/admin/tools/retired", json={"enabled": True}, headers=ADMIN)
            assert patched.status_code == 200 and patched.json()["enabled"] is True
            metrics = await http.get(prefix + "/metrics", headers=ADMIN)
            assert metrics.status_code == 200 and "skillyard_" in metrics.text
            mcp = await http.post(prefix + "/mcp", json=MCP_INIT["json"], headers={**MCP_INIT["headers"], **CALLER})
            assert mcp.status_code == 200 and '"serverInfo"' in mcp.text
            # public: the page, its files, health
            page = await http.get(prefix + "/")
            assert page.status_code == 200 and "<title>skillyard</title>" in page.text
            assert (await http.get(prefix + "/static/app.js")).status_code == 200
            assert (await http.get(prefix + "/healthz")).json() == {"status": "ok"}

    asyncio.run(go())


def test_embedded_without_keys_only_loopback_is_served_as_local(engine: Any) -> None:
    """The deliberate keyless mode, mounted: loopback is the admin `local`, anyone else is refused.
    (This held before the fix too: it guards that refusing a missing principal kept this mode.)"""
    async def go() -> None:
        async with _client(engine, "root-path-and-mount", keys="") as (http, prefix):
            assert (await http.get(prefix + "/v1/whoami")).json() == {"name": "local", "role": "admin", "auth": False}
            assert (await http.post(prefix + "/v1/admin/reload")).status_code == 200
        async with _client(engine, "root-path-and-mount", keys="", client=("203.0.113.9", 5000)) as (http, prefix):
            for method, path, kwargs, _ in PROTECTED:
                answer = await http.request(method, prefix + path, **kwargs)
                assert _refused(answer, 403, "peer_not_allowed"), path

    asyncio.run(go())


@pytest.mark.parametrize("keys", [KEYS, ""])
def test_a_route_that_finds_no_principal_refuses_instead_of_acting_as_admin(engine: Any, keys: str) -> None:
    """Every route behind a key, reached without `Access` (which alone puts a principal in the
    scope): 401 with the usual body, never the admin `local` — with keys or without."""
    from engine.server import create_app
    from engine.server.access import Access

    service = create_app(engine, api_keys=keys)
    service.user_middleware = [m for m in service.user_middleware if m.cls is not Access]
    values = {"name": "echo", "run_id": "run_x", "tool_call_id": "call_x", "batch_id": "batch_x", "session_id": "s_x"}
    requests = [(method.upper(), path.format(**values)) for path, operations in service.openapi()["paths"].items()
                if path.startswith("/v1/") for method in operations]  # every documented route behind a key
    requests += [("POST", "/mcp"), ("GET", "/metrics")]  # and the two the document leaves out
    assert len(requests) >= 20

    async def go() -> None:
        transport = httpx.ASGITransport(app=service, raise_app_exceptions=False)
        async with service.router.lifespan_context(service):
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
                for method, path in requests:
                    body = MCP_INIT if path == "/mcp" else ({"json": {}} if method in ("POST", "PATCH") else {})
                    answer = await http.request(method, path, **body)
                    assert _refused(answer, 401, "unauthorized"), (method, path, answer.status_code, answer.text[:200])
                    assert answer.headers["www-authenticate"] == "Bearer"
                    assert "an API key is required" in json.dumps(answer.json())
        tools = ToolAdmin(engine).views()
        assert {t["name"]: t["enabled"] for t in tools}["echo"] is True  # nothing was changed

    asyncio.run(go())


@pytest.mark.slow
def test_the_page_works_mounted_in_chromium(tmp_path: Path) -> None:
    """The web page at `/skillyard/` of a real uvicorn serving the app mounted: its files and
    every API call resolve under the prefix, with the key from the page's box."""
    pytest.importorskip("uvicorn")
    sync_api = pytest.importorskip("playwright.sync_api")
    from test_server_docs_assets import KEYS as ADMIN_ONLY
    from test_server_docs_assets import _embedded_server
    from test_web_ui import ARGS, CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    key = ADMIN_ONLY.rsplit(":", 1)[1]
    with _embedded_server(tmp_path) as base, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page()
            answered: list[tuple[int, str]] = []
            errors: list[str] = []
            page.on("response", lambda response: answered.append((response.status, urlsplit(response.url).path)))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.add_init_script(f"localStorage.setItem('skillyard.apiKey', {json.dumps(key)})")
            page.goto(f"{base}/skillyard")  # redirected to /skillyard/
            page.wait_for_selector("body[data-ready=true]", timeout=20000)
            page.wait_for_selector("#tool-list li[data-tool=echo]", timeout=10000)
            badge = page.inner_text("#role-badge")
            page.click("#tool-list li[data-tool=echo]")
            page.fill("[name=name]", "Ada")
            page.click("#run-tool")
            page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=10000)
            result = page.inner_text("#tool-result")
        finally:
            browser.close()
    assert badge == "admin" and "Ada" in result and not errors, (badge, errors)
    assert answered[0] == (307, "/skillyard"), answered
    # the chat asks for its past conversations; without a run store that is 409 no_store (then it keeps them itself)
    bad = [(status, path) for status, path in answered[1:]
           if not (path.startswith("/skillyard/") and (status < 400 or (status, path) == (409, "/skillyard/v1/sessions")))]
    assert not bad, bad
    assert {"/skillyard/static/app.css", "/skillyard/v1/whoami", "/skillyard/v1/tools/echo/call"} <= {p for _, p in answered}
