"""A run started over `/mcp` belongs to the key that started it, as one started over the HTTP
routes does (issue 28, noticed after: such runs recorded no owner, so every caller key saw them
in `GET /v1/runs` and could read them). The app in process (httpx's ASGITransport), raw
JSON-RPC over streamable HTTP, a real SQLite store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
import httpx  # noqa: E402

from engine import Engine  # noqa: E402

KEY_A = "mcpowner-alice-key-0123456789abcdef"
KEY_B = "mcpowner-bob-key-0123456789abcdef01"
PROTOCOL = "2025-11-25"
TOOLS = """
tools:
  shout:
    description: Says it loud.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    workflow: shout
"""
SKILLS = """
skills:
  upper:
    kind: template
    template: "{{ text | upper }}"
    input: {type: object, properties: {text: {type: string}}, required: [text]}
"""
WORKFLOWS = """
workflows:
  shout:
    steps:
      - {id: up, skill: upper, input: {text: $toolArgs.text}}
"""


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("application/json"):
        return response.json()  # type: ignore[no-any-return]
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads([d for d in data if d][-1])  # type: ignore[no-any-return]


async def _mcp_call(client: httpx.AsyncClient, key: str) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    opened = await client.post("/mcp", headers=auth, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "owner-test", "version": "0"}}})
    assert opened.status_code == 200, opened.text
    headers = {**auth, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    called = await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                               "params": {"name": "shout", "arguments": {"text": "hi"}}})
    return _answer(called)


def test_a_run_started_over_mcp_is_its_callers_only(tmp_path: Path) -> None:
    for name, text in {"tools.yaml": TOOLS, "skills.yaml": SKILLS, "workflows.yaml": WORKFLOWS}.items():
        (tmp_path / name).write_text(text)
    engine = Engine.from_dir(tmp_path, store=tmp_path / "runs.db")
    from engine.server import create_app

    app = create_app(engine, api_keys=f"alice:caller:{KEY_A},bob:caller:{KEY_B}")

    async def main() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=30) as client:
                answer = await _mcp_call(client, KEY_A)
                assert answer["result"]["content"][0]["text"] == "HI", answer
                alice = (await client.get("/v1/runs", headers={"Authorization": f"Bearer {KEY_A}"})).json()
                bob = (await client.get("/v1/runs", headers={"Authorization": f"Bearer {KEY_B}"})).json()
                assert [run["name"] for run in alice] == ["shout"], alice
                assert bob == [], "another key sees a run started over /mcp"
                run_id = alice[0]["id"]
                read = await client.get(f"/v1/runs/{run_id}", headers={"Authorization": f"Bearer {KEY_B}"})
                assert read.status_code == 404, read.text
                assert (await client.get(f"/v1/runs/{run_id}", headers={"Authorization": f"Bearer {KEY_A}"})).status_code == 200

    try:
        asyncio.run(main())
    finally:
        engine.close()
