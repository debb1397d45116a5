"""The layers in front of a tool call (issue 13): `ServiceApp` puts `Access` and `DirectRoute`
before Starlette's error middleware, `Access` reads the headers once (the first value of
each), and the call route answers with raw ASGI messages. The app in process, on a real
project: what each layer used to answer, it still answers."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from engine import Engine  # noqa: E402
from server_helpers import parse_sse, write_project  # noqa: E402

KEY = "front-test-key-0123456789abcdef0123"


def _request(app: Any, method: str, url: str, *, raw_headers: list[tuple[bytes, bytes]] | None = None,
             **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            request = client.build_request(method, url, **kwargs)
            if raw_headers is not None:  # repeated headers, in this order (instead of httpx's own of that name)
                names = {name for name, _ in raw_headers}
                request.headers = httpx.Headers([h for h in request.headers.raw if h[0].lower() not in names] + raw_headers)
            return await client.send(request)

    return asyncio.run(go())


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    engine = Engine.from_dir(write_project(tmp_path))
    yield engine
    engine.close()


def test_a_crash_of_the_call_route_is_answered_by_the_apps_500_handler(engine: Any, caplog: Any) -> None:
    from engine.server import create_app

    app = create_app(engine, api_keys="", mcp=False)

    def broken_start(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the hub is broken")

    app.state.hub.start = broken_start
    with caplog.at_level(logging.ERROR):
        crashed = _request(app, "POST", "/v1/tools/echo/call", json={"name": "Ada"})
    assert crashed.status_code == 500
    assert crashed.json()["error"] == {"code": "server_error", "message": "RuntimeError: the server failed; see its log"}
    assert "the hub is broken" not in crashed.text
    # the router's routes still pass Starlette's layers: an unknown path is the usual 404 body
    assert _request(app, "GET", "/v1/nope").json()["error"]["code"] == "not_found"


def test_access_takes_the_first_value_of_a_repeated_header(engine: Any) -> None:
    from engine.server import create_app

    app = create_app(engine, api_keys="", mcp=False)
    first_bad = _request(app, "GET", "/v1/whoami", raw_headers=[(b"origin", b"https://evil.example"),
                                                               (b"origin", b"http://127.0.0.1:8000")])
    assert first_bad.status_code == 403 and first_bad.json()["error"]["code"] == "origin_not_allowed"
    first_good = _request(app, "GET", "/v1/whoami", raw_headers=[(b"origin", b"http://127.0.0.1:8000"),
                                                                (b"origin", b"https://evil.example")])
    assert first_good.status_code == 200
    # Accept: the first value decides between the SSE and the JSON answer
    sse = _request(app, "POST", "/v1/tools/echo/call", json={"name": "Ada"},
                   raw_headers=[(b"accept", b"text/event-stream"), (b"accept", b"application/json")])
    assert sse.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert parse_sse(sse.text)[-1]["event"] == "tool_call_result" and sse.headers["x-run-id"]
    plain = _request(app, "POST", "/v1/tools/echo/call", json={"name": "Ada"},
                     raw_headers=[(b"accept", b"application/json"), (b"accept", b"text/event-stream")])
    assert plain.headers["content-type"] == "application/json" and plain.json()["data"] == {"name": "Ada", "count": 1}
    assert plain.headers["content-length"] == str(len(plain.content)) and plain.headers["x-run-id"] == plain.json()["run_id"]


def test_keys_are_read_from_either_header_and_the_body_cap_holds(engine: Any) -> None:
    from engine.server import create_app

    app = create_app(engine, api_keys=f"bob:caller:{KEY}", mcp=False, max_body_bytes=64)
    assert _request(app, "POST", "/v1/tools/echo/call", json={"name": "Ada"}).status_code == 401
    wrong = _request(app, "POST", "/v1/tools/echo/call", json={"name": "Ada"}, headers={"X-API-Key": "not-the-key"})
    assert wrong.status_code == 401 and wrong.json()["error"]["message"] == "the API key is not valid"
    bearer = _request(app, "POST", "/v1/tools/echo/call", json={"name": "Ada"}, headers={"Authorization": f"Bearer {KEY}"})
    assert bearer.status_code == 200 and bearer.json()["ok"] is True
    api_key = _request(app, "POST", "/v1/tools/echo/call", json={"name": "Ada"}, headers={"X-API-Key": KEY})
    assert api_key.status_code == 200
    assert _request(app, "GET", "/v1/whoami", headers={"X-API-Key": KEY}).json() == {"name": "bob", "role": "caller",
                                                                                  "auth": True}
    too_big = _request(app, "POST", "/v1/tools/echo/call", json={"name": "x" * 100}, headers={"X-API-Key": KEY})
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "payload_too_large"

    async def chunks() -> Any:  # no Content-Length: counted while it streams in
        yield b'{"name": "'
        yield b"y" * 100
        yield b'"}'

    json_key = {"X-API-Key": KEY, "Content-Type": "application/json"}
    chunked = _request(app, "POST", "/v1/tools/echo/call", content=chunks(), headers=json_key)
    assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "payload_too_large"

    async def small() -> Any:
        yield b'{"name": '
        yield b'"z"}'

    assert _request(app, "POST", "/v1/tools/echo/call", content=small(), headers=json_key).json()["data"] == {
        "name": "z", "count": 1}


def test_the_direct_route_answers_through_a_sync_exception_handler_as_the_router_does() -> None:
    from fastapi import FastAPI, Request
    from fastapi.responses import PlainTextResponse

    from engine.server.direct import DirectRoute

    app = FastAPI()

    @app.post("/call")
    async def call(request: Request) -> None:
        raise LookupError("gone")

    def sync_handler(request: Request, exc: Exception) -> PlainTextResponse:  # Starlette allows a plain function
        return PlainTextResponse(f"sync handler: {exc}", status_code=410)

    app.add_exception_handler(LookupError, sync_handler)
    route = next(r for r in app.routes if getattr(r, "path", "") == "/call")
    app.add_middleware(DirectRoute, route=route, handlers=app.exception_handlers)
    answer = _request(app, "POST", "/call")
    assert (answer.status_code, answer.text) == (410, "sync handler: gone")
