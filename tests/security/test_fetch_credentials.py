"""A fetch tool's configured credentials go only where the operator said.

`defaultHeaders` holding a reference, or named like a credential (`Authorization`, `Cookie`,
`*-Key`, `*-Token`), need `allowedDomains` (else a load error at the header's line); they never
reach a host outside it; and a redirect to another origin carries none of the tool's
`defaultHeaders`. Header-echo servers on 127.0.0.1 record what each host received.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest

from engine import Engine
from engine.errors import ConfigError
from engine.link.linker import load_project
from fetch_support import LoopbackServer, send, serving
from secrets_support import plant, write


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    yield from serving()


@pytest.fixture
def other() -> Iterator[LoopbackServer]:
    yield from serving()


def echo(server: LoopbackServer) -> str:
    server.routes["/echo"] = lambda h: send(h, 200, json.dumps(dict(h.headers.items())).encode(), "application/json")
    return server.url("/echo")


def tool(headers: str, domains: str = "") -> str:
    return f"""
        tools:
          readApi:
            type: fetch
            description: Read the API.
            config:
              parseMode: json
              allowPrivateNetworks: ["127.0.0.0/8"]{domains}
              defaultHeaders: {headers}
    """


@pytest.mark.parametrize("headers", [
    '{Authorization: "Bearer abc"}',
    '{Cookie: "session=abc"}',
    '{X-Api-Key: "abc"}',
    '{Private-Token: "abc"}',
    '{X-Trace: "${env:FETCH_CRED_ANY:-from-a-reference}"}',
])
def test_a_credential_without_allowed_domains_is_a_load_error_at_its_line(tmp_path: Path, headers: str) -> None:
    root = write(tmp_path / "p", {"tools.yaml": tool(headers)})
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    [issue] = caught.value.issues
    assert (issue.location.file, issue.location.line) == ("tools.yaml", 8)
    assert "allowedDomains" in issue.message and "abc" not in str(issue) and "from-a-reference" not in str(issue)


def test_a_plain_header_needs_no_allowed_domains(tmp_path: Path) -> None:
    root = write(tmp_path / "p", {"tools.yaml": tool('{X-Trace: "plain", Accept-Language: "en"}')})
    assert "readApi" in load_project(root).tools


def test_a_credential_never_reaches_a_host_outside_allowed_domains(tmp_path: Path, server: LoopbackServer,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    secret = plant("fetch-cred")
    monkeypatch.setenv("FETCH_CRED_TOKEN", secret)
    root = write(tmp_path / "p", {"tools.yaml": tool('{Authorization: "Bearer ${env:FETCH_CRED_TOKEN}"}',
                                                     '\n              allowedDomains: ["api.example.com"]')})
    engine = Engine.from_dir(root)
    try:
        result = engine.call_tool_sync("readApi", {"url": echo(server)})  # a caller names another host
    finally:
        engine.close()
    assert result.error is not None and result.error.code == "blocked"
    assert server.seen == []  # nothing went out


def test_a_cross_origin_redirect_strips_every_configured_header(tmp_path: Path, server: LoopbackServer,
                                                                other: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    token, key = plant("bearer"), plant("api-key")
    monkeypatch.setenv("FETCH_CRED_TOKEN", token)
    monkeypatch.setenv("FETCH_CRED_KEY", key)
    target = echo(other)  # another origin (port), allowed as a host too
    server.routes["/go"] = lambda h: send(h, 302, b"", "text/plain", Location=target)
    server.routes["/same"] = lambda h: send(h, 302, b"", "text/plain", Location="/echo")
    echo(server)
    headers = '{Authorization: "Bearer ${env:FETCH_CRED_TOKEN}", X-Api-Key: "${env:FETCH_CRED_KEY}", X-Trace: "plain-trace"}'
    root = write(tmp_path / "p", {"tools.yaml": tool(headers, '\n              allowedDomains: ["127.0.0.1"]')})
    engine = Engine.from_dir(root)
    try:
        moved = engine.call_tool_sync("readApi", {"url": server.url("/go")})
        stayed = engine.call_tool_sync("readApi", {"url": server.url("/same")})
    finally:
        engine.close()
    assert moved.error is None and stayed.error is None, (moved.error, stayed.error)
    first, same_origin = server.seen[0].headers, server.seen[-1].headers
    assert first["authorization"] == f"Bearer {token}" and first["x-api-key"] == key and first["x-trace"] == "plain-trace"
    assert same_origin["authorization"] == f"Bearer {token}" and same_origin["x-trace"] == "plain-trace"  # same origin: kept
    [received] = other.seen
    assert not {"authorization", "x-api-key", "x-trace"} & set(received.headers), received.headers
    assert token not in json.dumps(moved.data) and key not in json.dumps(moved.data)


def test_the_documented_read_api_example_binds_its_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/configuration.md's own example loads, and names the hosts its token is for."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(tools:\n  readApi:\n.*?)```", docs, re.DOTALL)
    assert block is not None
    monkeypatch.setenv("API_TOKEN", plant("doc"))
    root = write(tmp_path / "p", {"tools.yaml": block.group(1)})
    project = load_project(root)
    assert project.tools["readApi"].config["allowed_domains"]
