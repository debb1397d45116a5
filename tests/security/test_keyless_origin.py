"""Keyless mode trusts only pages of the service's own origin (scheme, host and port), and every
body under /v1/ must say it is JSON: a page on `localhost:3000` (another program on the same
machine, any site a DNS trick puts there) cannot call tools, neither with the `text/plain` body
a browser sends without a preflight nor with a JSON one. In process, through httpx's
ASGITransport, the requests as a browser would send them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from server_helpers import write_project

KEY = "caller-key-0123456789abcdef0123"
OWN = "http://127.0.0.1:8000"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_dir(write_project(tmp_path))
    yield engine
    engine.close()


def _request(app: Any, method: str, url: str, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=OWN) as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(go())


def _keyless(engine: Engine) -> Any:
    from engine.server import create_app

    return create_app(engine, api_keys="", mcp=False)


def test_a_page_of_another_local_port_cannot_call_tools(engine: Engine) -> None:
    app = _keyless(engine)
    for origin in ("http://localhost:3000", "http://127.0.0.1:3000", "http://localhost:8000", "https://127.0.0.1:8000"):
        for kind, body in (("text/plain", '{"name": "x"}'), ("application/json", '{"name": "x"}')):
            answer = _request(app, "POST", "/v1/tools/echo/call", content=body,
                              headers={"Origin": origin, "Content-Type": kind})
            assert answer.status_code == 403, (origin, kind, answer.text)
            assert answer.json()["error"]["code"] == "origin_not_allowed"
            assert OWN in answer.json()["error"]["message"], "it names the one origin it trusts"


def test_a_page_of_its_own_origin_calls_with_json(engine: Engine) -> None:
    app = _keyless(engine)
    answer = _request(app, "POST", "/v1/tools/echo/call", json={"name": "x"},
                      headers={"Origin": OWN, "Sec-Fetch-Site": "same-origin"})
    assert answer.status_code == 200 and answer.json()["data"] == {"name": "x", "count": 1}
    assert _request(app, "GET", "/v1/whoami").status_code == 200, "curl sends no Origin: a loopback client is served"


def test_a_cross_site_read_without_an_origin_is_refused_by_its_fetch_metadata(engine: Engine) -> None:
    app = _keyless(engine)
    for site in ("same-site", "cross-site"):
        answer = _request(app, "GET", "/v1/runs", headers={"Sec-Fetch-Site": site})
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "origin_not_allowed", site
    assert _request(app, "GET", "/v1/runs", headers={"Sec-Fetch-Site": "none"}).status_code == 200
    linked = _request(app, "GET", "/", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
    assert linked.status_code == 200, "the page itself opens from a link on another site"


@pytest.mark.parametrize("keys", ["", f"alice:caller:{KEY}"])
@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None])
def test_a_call_body_that_is_not_said_to_be_json_is_a_422_saying_what_to_send(engine: Engine, keys: str,
                                                                              kind: str | None) -> None:
    from engine.server import create_app

    app = create_app(engine, api_keys=keys, mcp=False)
    headers = {"Origin": OWN, **({"Authorization": f"Bearer {KEY}"} if keys else {})}
    if kind is not None:
        headers["Content-Type"] = kind
    answer = _request(app, "POST", "/v1/tools/echo/call", content=b'{"name": "x"}', headers=headers)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and "Content-Type: application/json" in error["message"]
    assert (kind or "no Content-Type").split(";")[0] in error["message"], "it says what the request sent"


def test_json_with_parameters_and_a_call_without_a_body_are_taken(engine: Engine) -> None:
    app = _keyless(engine)
    answer = _request(app, "POST", "/v1/tools/echo/call", content=b'{"name": "x"}',
                      headers={"Content-Type": "application/json; charset=utf-8"})
    assert answer.status_code == 200, answer.text
    bare = _request(app, "POST", "/v1/tools/echo/call")  # no arguments: nothing to say the type of
    assert bare.json()["error"]["code"] == "invalid_arguments", "the tool's own answer, not the door's"
