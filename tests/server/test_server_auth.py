"""API keys, roles and the loopback-only rule when no keys are configured (in process)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from engine import Engine  # noqa: E402
from engine.server.auth import ApiKeys, KeyConfigError, is_loopback_host, load_api_keys, presented_key, same_origin  # noqa: E402
from server_helpers import write_project  # noqa: E402

LONG = "k" * 24


def test_keys_parse_from_the_env_format_and_are_kept_as_digests() -> None:
    keys = ApiKeys.parse(f"admin:{LONG}, caller:{'c' * 20}")
    assert [entry.role for entry in keys.entries] == ["admin", "caller"]
    assert all(LONG.encode() not in entry.digest for entry in keys.entries)  # only digests are kept
    assert keys.role_of(LONG) == "admin" and keys.role_of("c" * 20) == "caller"
    assert keys.role_of("k" * 23) is None and keys.role_of("") is None and keys.role_of(None) is None


def test_a_key_can_be_configured_as_its_sha256() -> None:
    digest = hashlib.sha256(LONG.encode()).hexdigest()
    keys = ApiKeys.parse(f"caller:sha256:{digest}")
    assert keys.role_of(LONG) == "caller"
    assert ApiKeys.parse([{"role": "admin", "key_sha256": digest}]).role_of(LONG) == "admin"
    assert ApiKeys.parse({"admin": [LONG]}).role_of(LONG) == "admin"


@pytest.mark.parametrize("spec, words", [
    ("root:" + LONG, "unknown API key role"),
    ("admin:short", "shorter than 16"),
    ("admin:", "empty"),
    (LONG, "has no role"),
])
def test_bad_key_configuration_says_what_to_fix(spec: str, words: str) -> None:
    with pytest.raises(KeyConfigError, match=words):
        ApiKeys.parse(spec)


def test_keys_from_the_environment_and_the_project_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRV_TEST_KEY", "c" * 20)

    class Server:
        api_keys = [{"role": "caller", "key": "${SRV_TEST_KEY}"}]  # as config/engine.yaml would say it

    class Settings:
        server = Server()

    keys = load_api_keys(settings=Settings(), environ={"SKILLYARD_API_KEYS": f"admin:{LONG}"})
    assert keys.role_of(LONG) == "admin" and keys.role_of("c" * 20) == "caller"
    assert not load_api_keys(settings=object(), environ={})
    Server.api_keys = [{"role": "caller", "key": "${SRV_TEST_UNSET_KEY}"}]
    with pytest.raises(KeyConfigError, match="SRV_TEST_UNSET_KEY"):
        load_api_keys(settings=Settings(), environ={})


def test_presented_key_and_loopback_names() -> None:
    assert presented_key({"authorization": f"Bearer {LONG}"}) == LONG
    assert presented_key({"x-api-key": LONG}) == LONG
    assert presented_key({"authorization": f"Basic {LONG}"}) is None
    for host in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"):
        assert is_loopback_host(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com"):
        assert not is_loopback_host(host), host
    assert same_origin("http://127.0.0.1:8000", "http", "127.0.0.1:8000")
    assert not same_origin("http://localhost:3000", "http", "127.0.0.1:8000")  # another port is another origin
    assert not same_origin("https://evil.example", "http", "127.0.0.1:8000") and not same_origin("null", "http", "localhost")


# ─── the app in process ──────────────────────────────────────────────────────────────────


def _request(app: Any, method: str, url: str, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(go())


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    engine = Engine.from_dir(write_project(tmp_path))
    yield engine
    engine.close()


def test_without_keys_only_loopback_hosts_and_origins_are_answered(engine: Any) -> None:
    from engine.server import create_app

    app = create_app(engine, api_keys="", mcp=False)
    assert _request(app, "GET", "/v1/whoami").json() == {"name": "local", "role": "admin", "auth": False}
    rebound = _request(app, "GET", "/v1/tools", headers={"Host": "attacker.example"})
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host_not_allowed"
    cross_site = _request(app, "POST", "/v1/tools/echo/call", content='{"name": "x"}',
                          headers={"Origin": "https://attacker.example", "Content-Type": "text/plain"})
    assert cross_site.status_code == 403 and cross_site.json()["error"]["code"] == "origin_not_allowed"
    same_site = _request(app, "POST", "/v1/tools/echo/call", json={"name": "x"}, headers={"Origin": "http://127.0.0.1:8000"})
    assert same_site.status_code == 200 and same_site.json()["data"] == {"name": "x", "count": 1}


def test_with_keys_any_host_is_fine_but_a_key_is_needed(engine: Any) -> None:
    from engine.server import create_app

    app = create_app(engine, api_keys=f"caller:{LONG}", mcp=False)
    assert _request(app, "GET", "/v1/tools", headers={"Host": "tools.internal"}).status_code == 401
    answered = _request(app, "GET", "/v1/tools", headers={"Host": "tools.internal", "Authorization": f"Bearer {LONG}"})
    assert answered.status_code == 200
    assert _request(app, "POST", "/v1/admin/reload", headers={"X-API-Key": LONG}).status_code == 403


def test_the_page_is_served_with_a_strict_content_security_policy(engine: Any) -> None:
    from engine.server import create_app

    app = create_app(engine, api_keys="", mcp=False)
    page = _request(app, "GET", "/")
    assert page.status_code == 200 and "<title>skillyard</title>" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert _request(app, "GET", "/static/app.js").status_code == 200
    assert _request(app, "GET", "/nope").json()["error"]["code"] == "not_found"


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    pytest.importorskip("uvicorn")
    from engine.cli.serve import main

    monkeypatch.delenv("SKILLYARD_API_KEYS", raising=False)
    root = write_project(tmp_path)
    assert main(["serve", "--dir", str(root), "--host", "0.0.0.0", "--no-store"]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve on 0.0.0.0 without API keys" in err and "SKILLYARD_API_KEYS" in err
    monkeypatch.setenv("SKILLYARD_API_KEYS", "admin:short")
    assert main(["serve", "--dir", str(root), "--no-store"]) == 2
    assert "shorter than 16" in capsys.readouterr().err
