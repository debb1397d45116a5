"""Issue 32 §2: secrets by reference (`${env:NAME}`, `${env:NAME:-default}`, `${file:…}`, `.env`).

A fetch tool's Authorization header is written as a reference; the value is planted through
the environment or a `.env` file beside the project, reaches the server it is meant for, and
is `[REDACTED]` in every sink (events, the store and its WAL, stdout, stderr, logs, HTTP
answers). Listings show the reference; the admin API and `skillyard tools` refuse a plain value.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.errors import ConfigError
from engine.link.linker import load_project
from engine.safety.redaction import REDACTED
from engine.spec.references import Resolver
from engine.tool_admin import ToolAdmin
from fetch_support import LoopbackServer, send, serving
from secrets_support import leaks, plant, sink_files, skillyard, write


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    yield from serving()


def echo_route(server: LoopbackServer) -> str:
    """A careless API that echoes the Authorization header it got into its body."""
    server.routes["/me"] = lambda h: send(h, 200, json.dumps({"auth_was": h.headers.get("Authorization")}).encode(), "application/json")
    return f"http://127.0.0.1:{server.port}/me"


def fetch_project(root: Path, header: str, extra: dict[str, str] | None = None) -> Path:
    tools = f"""
        tools:
          readApi:
            type: fetch
            description: Read the API.
            config:
              parseMode: json
              allowPrivateNetworks: ["127.0.0.0/8"]
              allowedDomains: ["127.0.0.1"]
              defaultHeaders:
                Authorization: "{header}"
          other:
            type: fetch
            description: Another tool.
            config: {{parseMode: raw, allowPrivateNetworks: ["127.0.0.0/8"]}}
    """
    return write(root, {"tools.yaml": tools, **(extra or {})})


def test_references_read_env_dotenv_defaults_and_files(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FROM_DOTENV=dotenv-value\nBOTH=dotenv-loses\n")
    (tmp_path / "secret.txt").write_text("file-value\n")
    resolver = Resolver(tmp_path, environ={"BOTH": "env-wins", "SHORT": "short-value"})
    assert resolver.text("${env:FROM_DOTENV}", short_form=False) == "dotenv-value"
    assert resolver.text("x ${env:BOTH} y", short_form=False) == "x env-wins y"  # .env never overrides
    assert resolver.text("${env:NOWHERE:-fallback}", short_form=False) == "fallback"
    assert resolver.text("${file:secret.txt}", short_form=False) == "file-value"  # final newline dropped
    assert resolver.text("${SHORT}", short_form=True) == "short-value"
    assert resolver.text("costs ${SHORT}", short_form=False) == "costs ${SHORT}"  # text in a prompt stays text
    assert resolver.as_written({"a": ["x env-wins y"]}) == {"a": ["x ${env:BOTH} y"]}
    assert {"dotenv-value", "env-wins", "file-value", "short-value"} <= resolver.secrets


def test_a_dotenv_secret_reaches_its_server_and_no_sink(tmp_path: Path, server: LoopbackServer,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    secret = plant("dotenv")
    monkeypatch.delenv("REF_TEST_TOKEN", raising=False)
    root = fetch_project(tmp_path / "p", "Bearer ${env:REF_TEST_TOKEN}", {".env": f"REF_TEST_TOKEN={secret}\n"})
    engine = Engine.from_dir(root, store=True)
    events: list[Any] = []
    try:
        result = engine.call_tool_sync("readApi", {"url": echo_route(server)}, on_event=events.append)
        assert result.error is None
        views = ToolAdmin(engine).views()
    finally:
        engine.close()
    assert server.seen[-1].headers["authorization"] == f"Bearer {secret}"  # the real value went out
    shown = next(v for v in views if v["name"] == "readApi")["config"]["default_headers"]
    assert shown == {"Authorization": "Bearer ${env:REF_TEST_TOKEN}"}  # the reference, never the value
    records = [json.dumps(e.to_dict()) for e in events]
    assert any(REDACTED in r for r in records)
    assert leaks(secret, records, sink_files(root)) == []
    assert "REF_TEST_TOKEN" not in __import__("os").environ  # .env is read, never written into the environment


def test_the_real_environment_wins_over_dotenv(tmp_path: Path, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    real = plant("real")
    monkeypatch.setenv("REF_TEST_TOKEN", real)
    root = fetch_project(tmp_path / "p", "${env:REF_TEST_TOKEN}", {".env": "REF_TEST_TOKEN=from-dotenv-file\n"})
    engine = Engine.from_dir(root)
    try:
        assert engine.call_tool_sync("readApi", {"url": echo_route(server)}).error is None
    finally:
        engine.close()
    assert server.seen[-1].headers["authorization"] == real


def test_a_missing_variable_is_a_load_error_at_its_line_or_breaks_only_its_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REF_TEST_MISSING", raising=False)
    root = fetch_project(tmp_path / "p", "Bearer ${env:REF_TEST_MISSING}")
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    [issue] = caught.value.issues
    assert issue.location.file == "tools.yaml" and issue.location.line == 10
    assert "REF_TEST_MISSING" in issue.message and "not set" in issue.message
    project = load_project(root, isolate_broken_tools=True)
    assert set(project.broken) == {"readApi"} and "other" in project.tools


def test_a_default_and_a_secret_file_serve_when_no_variable_is_set(tmp_path: Path, server: LoopbackServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    secret = plant("file")
    (tmp_path / "run-secret").write_text(secret + "\n")
    monkeypatch.delenv("REF_TEST_MISSING", raising=False)
    root = fetch_project(tmp_path / "p", "${file:" + str(tmp_path / "run-secret") + "} ${env:REF_TEST_MISSING:-plain-default}")
    engine = Engine.from_dir(root)
    try:
        assert engine.call_tool_sync("readApi", {"url": echo_route(server)}).error is None
        assert secret in engine.project.redactor.configured  # a known secret from load
    finally:
        engine.close()
    assert server.seen[-1].headers["authorization"] == f"{secret} plain-default"


def test_the_admin_api_refuses_a_plain_secret_and_stores_a_reference(tmp_path: Path, server: LoopbackServer,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.server.app import create_app

    secret = plant("admin")
    monkeypatch.setenv("REF_TEST_ADMIN_TOKEN", secret)
    operator = "server: {admin_private_networks: [127.0.0.0/8], admin_references: ['env:REF_TEST_*']}\n"
    root = fetch_project(tmp_path / "p", "${env:REF_TEST_ADMIN_TOKEN}", {"config/engine.yaml": operator})
    engine = Engine.from_dir(root, store=True)
    plain = {"name": "api2", "type": "fetch", "description": "d",
             "config": {"allowPrivateNetworks": ["127.0.0.0/8"], "allowedDomains": ["127.0.0.1"],
                        "defaultHeaders": {"Authorization": f"Bearer {secret}"}}}
    ref = {**plain, "config": {**plain["config"], "defaultHeaders": {"Authorization": "Bearer ${env:REF_TEST_ADMIN_TOKEN}"}}}

    async def talk() -> list[httpx.Response]:
        app = create_app(engine, api_keys="", mcp=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http:
            return [await http.post("/v1/admin/tools", json=plain),
                    await http.patch("/v1/admin/tools/readApi", json={"config": {"api_key": "plain-key-1234"}}),
                    await http.post("/v1/admin/tools", json=ref),
                    await http.get("/v1/admin/tools")]

    try:
        refused, patched, created, listed = asyncio.run(talk())
        result = engine.call_tool_sync("api2", {"url": echo_route(server)})
    finally:
        engine.close()
    assert refused.status_code == 422 and patched.status_code == 422
    assert "reference" in refused.json()["error"]["message"] and "defaultHeaders.Authorization" in refused.json()["error"]["message"]
    assert leaks(secret, [refused.text]) == []
    assert created.status_code == 201 and result.error is None
    assert server.seen[-1].headers["authorization"] == f"Bearer {secret}"
    assert leaks(secret, [listed.text], sink_files(root)) == []
    assert "Bearer ${env:REF_TEST_ADMIN_TOKEN}" in listed.text


def test_tools_add_and_set_refuse_a_plain_secret_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fetch_project(tmp_path / "p", "${env:REF_TEST_ANY:-x}")  # REF_TEST_ANY is set nowhere
    config = json.dumps({"defaultHeaders": {"Authorization": "Bearer abcdefgh12345"}})
    assert main(["tools", "add", "api2", "--type", "fetch", "--config", config, "--dir", str(root)]) == 2
    assert "reference" in capsys.readouterr().err
    assert main(["tools", "set", "readApi", "defaultHeaders={\"X-Api-Key\": \"abcdefgh12345\"}", "--dir", str(root)]) == 2
    err = capsys.readouterr().err
    assert "config.defaultHeaders.X-Api-Key" in err and "${env:" in err
    assert main(["tools", "set", "readApi", "defaultHeaders={\"X-Api-Key\": \"${env:REF_TEST_ANY:-a-default}\"}", "--dir", str(root)]) == 0


@pytest.mark.slow
def test_the_cli_shows_references_and_hides_values_in_stdout_stderr_and_logs(tmp_path: Path, server: LoopbackServer) -> None:
    secret = plant("cli")
    root = fetch_project(tmp_path / "p", "Bearer ${env:REF_TEST_CLI_TOKEN}", {
        ".env": f"REF_TEST_CLI_TOKEN={secret}\n",
        "config/engine.yaml": "logging: {level: debug, format: json}\n",
    })
    url = echo_route(server)
    called = skillyard("call", "readApi", "--arg", f"url={url}", "--dir", str(root), "--output", "events", cwd=root)
    listed = skillyard("tools", "--json", "--dir", str(root), cwd=root)
    assert called.returncode == 0, called.stderr
    assert server.seen[-1].headers["authorization"] == f"Bearer {secret}"
    *event_lines, answer = called.stdout.strip().splitlines()
    assert all(json.loads(line)["type"] for line in event_lines) and REDACTED in "".join(event_lines)
    assert "Bearer ${env:REF_TEST_CLI_TOKEN}" in listed.stdout
    # every sink, the caller's own answer too (its last line: the API echoed the operator's token)
    assert REDACTED in answer
    assert leaks(secret, [*event_lines, answer, called.stderr, listed.stdout, listed.stderr], sink_files(root)) == []
