"""One rule for secrets: a value read by reference (`${env:…}`, `${file:…}`) is the operator's and
reaches no sink, whichever door asks.

Planted: a token in the environment, a secret file, and a file shaped like /proc/self/environ
(NUL-separated, so that an error quoting it would escape it past any plain search). Grepped in
every sink: HTTP bodies (/v1/tools, /mcp tools/list and tools/call, /v1/tools/broken,
/v1/admin/problems, an admin 422, a call's JSON answer and its SSE stream, a config_error), the
SQLite store and its -wal file; the slow test adds a real `skillyard serve` (its log, and
`${file:/proc/self/environ}` for real) and the CLI's stdout and stderr.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.safety.redaction import REDACTED
from fetch_support import LoopbackServer, send, serving
from secrets_support import leaks, plant, sink_files, skillyard, write

KEY = "flow-admin-key-0123456789abcdef0123"
PROTOCOL = "2025-11-25"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    yield from serving()


def files(secret_file: Path, environ_file: Path) -> dict[str, str]:
    return {
        "tools.yaml": f"""
            tools:
              described:
                type: fetch
                description: "Reads the partner API with ${{env:FLOW_TOKEN}} (as text, never read)."
                title: "Partner ${{file:{secret_file}}}"
                parameters:
                  type: object
                  properties:
                    url: {{type: string, description: "${{env:FLOW_TOKEN}}", default: "${{file:{secret_file}}}"}}
                  required: [url]
                config:
                  parseMode: json
                  allowPrivateNetworks: ["127.0.0.0/8"]
                  allowedDomains: ["127.0.0.1"]
                  defaultHeaders: {{X-Api-Key: "${{env:FLOW_TOKEN}}", X-Note: "$${{env:FLOW_TOKEN}}"}}
              sized:
                type: fetch
                description: A size read from a file by mistake.
                config: {{maxResponseSize: "${{file:{secret_file}}}"}}
              environ:
                type: fetch
                description: A size read from the environment block by mistake.
                config: {{maxResponseSize: "${{file:{environ_file}}}"}}
              echoEnv:
                type: python
                description: Hands back the operator's token (a careless skill).
                config: {{function: "flow_helpers:echo_env"}}
        """,
        "flow_helpers.py": """
            import os


            def echo_env() -> dict:
                return {"token": os.environ["FLOW_TOKEN"], "note": "the token is " + os.environ["FLOW_TOKEN"]}
        """,
        "config/engine.yaml": f"server: {{admin_references: ['file:{secret_file.parent}/*']}}\n",
    }


def plant_all(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """The planted values by name, and the secret file and environ-like file holding two of them."""
    planted = {"token": plant("env-token"), "file": plant("file"), "environ": plant("environ")}
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    secret_file, environ_file = secrets / "size", secrets / "environ"
    secret_file.write_text(planted["file"] + "\n")
    environ_file.write_bytes(f"HOME=/root\0SECRET_IN_ENVIRON={planted['environ']}\0LANG=C\0".encode())
    return planted, secret_file, environ_file


def echo(server: LoopbackServer) -> str:
    """A careless API that echoes the headers it got."""
    server.routes["/me"] = lambda h: send(h, 200, json.dumps(dict(h.headers.items())).encode(), "application/json")
    return server.url("/me")


async def mcp(http: httpx.AsyncClient, headers: dict[str, str], calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Raw JSON-RPC over /mcp's streamable HTTP: initialize, then each (method, params)."""
    auth = {**headers, "Accept": "application/json, text/event-stream"}
    opened = await http.post("/mcp", headers=auth, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "flow", "version": "0"}}})
    assert opened.status_code == 200, opened.text
    session = {**auth, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    await http.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return [(await http.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": i + 1, "method": method, "params": params})).text
            for i, (method, params) in enumerate(calls)]


def test_no_planted_secret_reaches_any_http_body_or_the_store(tmp_path: Path, server: LoopbackServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp")
    from engine.server.app import create_app

    planted, secret_file, environ_file = plant_all(tmp_path)
    monkeypatch.setenv("FLOW_TOKEN", planted["token"])
    root = write(tmp_path / "p", files(secret_file, environ_file))
    url = echo(server)
    engine = Engine.from_dir(root, store=True, isolate_broken_tools=True)
    auth = {"Authorization": f"Bearer {KEY}"}

    async def talk() -> dict[str, httpx.Response | list[str]]:
        app = create_app(engine, api_keys=f"ops:admin:{KEY}")
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000", timeout=30) as http:
                async def admin(path: str) -> httpx.Response:
                    tool = {"name": "adminSized", "type": "fetch", "description": "d", "config": {"maxResponseSize": "${file:" + path + "}"}}
                    return await http.post("/v1/admin/tools", json=tool, headers=auth)

                return {
                    "tools": await http.get("/v1/tools", headers=auth),
                    "tools_mcp": await http.get("/v1/tools?format=mcp", headers=auth),
                    "broken": await http.get("/v1/tools/broken", headers=auth),
                    "problems": await http.get("/v1/admin/problems", headers=auth),
                    "admin_file": await admin(str(secret_file)),
                    "admin_environ": await admin(str(environ_file)),
                    "call": await http.post("/v1/tools/described/call", json={"url": url}, headers=auth),
                    "sse": await http.post("/v1/tools/described/call", json={"url": url}, headers={**auth, "Accept": "text/event-stream"}),
                    "skill": await http.post("/v1/tools/echoEnv/call", json={}, headers=auth),
                    "config_error": await http.post("/v1/tools/sized/call", json={"url": url}, headers=auth),
                    "mcp": await mcp(http, auth, [("tools/list", {}), ("tools/call", {"name": "echoEnv", "arguments": {}}),
                                                  ("tools/call", {"name": "described", "arguments": {"url": url}})]),
                }

    try:
        answers = asyncio.run(talk())
    finally:
        engine.close()
    texts = [text for answer in answers.values() for text in (answer if isinstance(answer, list) else [answer.text])]
    for value in planted.values():
        assert leaks(value, texts, sink_files(root)) == [], value
    assert server.seen[0].headers["x-api-key"] == planted["token"]  # the real value went where it was meant to
    assert server.seen[0].headers["x-note"] == "${env:FLOW_TOKEN}"  # `$${` is a literal `${`
    tools = {t["function"]["name"]: t["function"] for t in answers["tools"].json()}  # type: ignore[union-attr]
    assert tools["described"]["description"].startswith("Reads the partner API with ${env:FLOW_TOKEN} (as text")
    mcp_tools = {t["name"]: t for t in answers["tools_mcp"].json()}  # type: ignore[union-attr]
    assert mcp_tools["described"]["inputSchema"]["properties"]["url"]["default"] == f"${{file:{secret_file}}}"
    assert mcp_tools["described"]["title"] == f"Partner ${{file:{secret_file}}}"
    assert "the value read from `${file:" in answers["admin_file"].text and answers["admin_file"].status_code == 422  # type: ignore[union-attr]
    assert answers["admin_environ"].status_code == 422 and "SECRET_IN_ENVIRON" not in answers["admin_environ"].text  # type: ignore[union-attr]
    assert "the value read from `${file:" in answers["broken"].text  # type: ignore[union-attr]
    for name in ("call", "sse", "skill"):
        assert REDACTED in answers[name].text, name  # type: ignore[union-attr]
    assert answers["config_error"].json()["error"]["code"] == "config_error"  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_served_process_its_log_and_the_cli_hold_no_planted_secret(tmp_path: Path) -> None:
    """A real `skillyard serve` reading `${file:/proc/self/environ}` (the operator's whole
    environment) into a size by mistake, and the CLI on the same project."""
    from server_helpers import running_server

    planted, secret_file, environ_file = plant_all(tmp_path)
    project = files(secret_file, environ_file)
    project["tools.yaml"] = project["tools.yaml"].replace(str(environ_file), "/proc/self/environ")
    project["config/engine.yaml"] = "server: {admin_references: ['file:/proc/*/environ']}\nlogging: {level: debug, format: json}\n"
    root = write(tmp_path / "p", project)
    env = {"FLOW_TOKEN": planted["token"], "SECRET_IN_ENVIRON": planted["environ"]}
    import os

    os.environ.update(env)  # the served process and the CLI inherit it (removed below)
    try:
        headers = {"Authorization": f"Bearer {KEY}"}
        with running_server(root, keys=f"ops:admin:{KEY}") as served:
            bodies = [httpx.get(f"{served.url}{path}", headers=headers, timeout=30).text
                      for path in ("/v1/tools", "/v1/tools/broken", "/v1/admin/problems")]
            tool = {"name": "adminEnv", "type": "fetch", "description": "d", "config": {"maxResponseSize": "${file:/proc/self/environ}"}}
            refused = httpx.post(f"{served.url}/v1/admin/tools", json=tool, headers=headers, timeout=30)
            called = httpx.post(f"{served.url}/v1/tools/echoEnv/call", json={}, headers=headers, timeout=30)
        log = served.log.read_text()
        cli = [skillyard("call", "echoEnv", "--dir", str(root), cwd=root),
               skillyard("tools", "--json", "--dir", str(root), cwd=root),
               skillyard("validate", str(root), cwd=root)]
    finally:
        for name in env:
            os.environ.pop(name, None)
    assert refused.status_code == 422 and "the value read from `${file:/proc/self/environ}`" in refused.text, refused.text
    assert called.status_code == 200 and REDACTED in called.text
    assert cli[0].returncode == 0 and REDACTED in cli[0].stdout, cli[0].stderr
    assert "the value read from `${file:/proc/self/environ}`" in cli[2].stdout + cli[2].stderr
    texts = [*bodies, refused.text, called.text, log, *(p.stdout for p in cli), *(p.stderr for p in cli)]
    for value in planted.values():
        assert leaks(value, texts, sink_files(root)) == [], value
