"""An admin key is trusted with tools, not with the host: what it stores through `/v1/admin/tools`
opens only the private networks (`server.admin_private_networks`) and reads only the references
(`server.admin_references`) the operator listed in config/engine.yaml; anything else is 403
`forbidden`, before a value is read or a tool is linked. The app in process (ASGITransport).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from secrets_support import leaks, plant, write

TOOLS = """
    tools:
      internal:
        type: fetch
        description: The operator's own internal reader.
        config: {allowPrivateNetworks: ["10.1.0.0/16"], allowedDomains: [wiki.internal], defaultHeaders: {X-Api-Key: "${env:EGRESS_OWN_KEY}"}}
"""


def fetch(name: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "type": "fetch", "description": "Read a page.", "config": config}


def talk(root: Path, requests: list[tuple[str, str, Any]]) -> list[httpx.Response]:
    from engine.server.app import create_app

    engine = Engine.from_dir(root, store=True)

    async def run() -> list[httpx.Response]:
        app = create_app(engine, api_keys="", mcp=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http:
            return [await http.request(method, path, json=body) for method, path, body in requests]

    try:
        return asyncio.run(run())
    finally:
        engine.close()


def project(root: Path, server: str = "", monkeypatch: pytest.MonkeyPatch | None = None) -> Path:
    files = {"tools.yaml": TOOLS}
    if server:
        files["config/engine.yaml"] = f"server: {server}\n"
    if monkeypatch is not None:
        monkeypatch.setenv("EGRESS_OWN_KEY", plant("own"))
    return write(root, files)


def test_private_networks_are_refused_unless_the_operator_listed_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    everything = fetch("metadata", {"allowPrivateNetworks": ["0.0.0.0/0"]})
    default = talk(project(tmp_path / "a", monkeypatch=monkeypatch), [("POST", "/v1/admin/tools", everything)])
    root = project(tmp_path / "b", "{admin_private_networks: [10.20.0.0/16]}", monkeypatch)
    answers = talk(root, [
        ("POST", "/v1/admin/tools", everything),
        ("POST", "/v1/admin/tools", fetch("wide", {"allowPrivateNetworks": ["10.0.0.0/8"]})),  # wider than listed
        ("POST", "/v1/admin/tools", fetch("meta", {"allowPrivateNetworks": "169.254.169.254/32"})),
        ("POST", "/v1/admin/tools", fetch("ref", {"allowPrivateNetworks": ["${env:ANY_NET}"]})),  # read later: refused now
        ("PUT", "/v1/admin/tools/internal", {"config": {"allowPrivateNetworks": ["0.0.0.0/0"]}}),
        ("PATCH", "/v1/admin/tools/internal", {"config": {"allow_private_networks": ["127.0.0.0/8"]}}),
        ("POST", "/v1/admin/tools/test", {"name": "draft", "tool": {"type": "fetch", "config": {"allowPrivateNetworks": ["169.254.0.0/16"]}},
                                          "arguments": {"url": "http://169.254.169.254/latest/meta-data/"}}),
        ("POST", "/v1/admin/tools", fetch("partner", {"allowPrivateNetworks": ["10.20.3.0/24"]})),  # inside: stored
        ("PATCH", "/v1/admin/tools/internal", {"config": {"allowPrivateNetworks": ["10.1.0.0/16", "10.20.0.0/16"]}}),  # its own + listed
    ])
    assert default[0].status_code == 403 and default[0].json()["error"]["code"] == "forbidden"
    assert "server.admin_private_networks" in default[0].json()["error"]["message"]
    *refused, stored, patched = answers
    assert [a.status_code for a in refused] == [403] * 7, [a.text for a in refused]
    assert stored.status_code == 201 and patched.status_code == 200, (stored.text, patched.text)


def test_references_are_refused_unless_the_operator_listed_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret_file = tmp_path / "secrets" / "partner-token"
    secret_file.parent.mkdir()
    secret_file.write_text(plant("partner-file"))
    outside = tmp_path / "other-secret"
    outside.write_text(plant("outside"))
    monkeypatch.setenv("PARTNER_TOKEN", plant("partner"))
    monkeypatch.setenv("OPENAI_API_KEY", plant("openai"))
    server = f"{{admin_references: ['env:PARTNER_*', 'file:{secret_file.parent}/partner-*']}}"
    root = project(tmp_path / "p", server, monkeypatch)

    def header(value: str) -> dict[str, Any]:
        return {"allowedDomains": ["api.example.com"], "defaultHeaders": {"X-Api-Key": value}}

    answers = talk(root, [
        ("POST", "/v1/admin/tools", fetch("a", header("${env:OPENAI_API_KEY}"))),
        ("POST", "/v1/admin/tools", fetch("b", header("${OPENAI_API_KEY}"))),  # the short form is the same variable
        ("POST", "/v1/admin/tools", fetch("c", header("${file:" + str(outside) + "}"))),
        ("POST", "/v1/admin/tools", fetch("d", header("${file:" + str(secret_file.parent) + "/../other-secret}"))),
        ("POST", "/v1/admin/tools", fetch("e", header("${file:/proc/self/environ}"))),
        ("PATCH", "/v1/admin/tools/internal", {"config": {"defaultHeaders": {"X-Api-Key": "${env:OPENAI_API_KEY}"}}}),
        ("POST", "/v1/admin/tools", fetch("f", header("${env:PARTNER_TOKEN}"))),
        ("POST", "/v1/admin/tools", fetch("g", header("${file:" + str(secret_file) + "}"))),
        ("POST", "/v1/admin/tools", fetch("h", {"defaultHeaders": {"X-Trace": "$${env:OPENAI_API_KEY}"}})),  # escaped: text
        ("PUT", "/v1/admin/tools/internal", {"config": {"allowedDomains": ["wiki.internal"], "allowPrivateNetworks": ["10.1.0.0/16"],
                                                        "defaultHeaders": {"X-Api-Key": "${env:EGRESS_OWN_KEY}"}}}),  # its own
    ])
    *refused, partner, partner_file, escaped, own = answers
    assert [a.status_code for a in refused] == [403] * 6, [a.text for a in refused]
    assert all(a.json()["error"]["code"] == "forbidden" and "server.admin_references" in a.text for a in refused)
    assert [partner.status_code, partner_file.status_code, escaped.status_code, own.status_code] == [201, 201, 201, 200], \
        [partner.text, partner_file.text, escaped.text, own.text]
    assert leaks(outside.read_text(), [a.text for a in answers]) == []
    assert escaped.json()["config"]["default_headers"] == {"X-Trace": "$${env:OPENAI_API_KEY}"}  # as written


def test_the_operator_on_the_cli_is_not_held_by_the_admin_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path / "p", monkeypatch=monkeypatch)
    assert main(["tools", "set", "internal", 'allowPrivateNetworks=["10.9.0.0/16"]', "--dir", str(root)]) == 0, capsys.readouterr().err
