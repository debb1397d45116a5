"""Issue 32 §1: an MCP server's elicitation answered with values — over HTTP through the run's
approvals endpoint (checked against the requested schema), and at a terminal field by field.

The server is tests/mcp_fixture_server.py (a subprocess): its `ask` tool asks for
`{color: str = "blue", shade: int = 3}` and says what it got back.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.executors.mcp_client import registry
from secrets_support import write

FIXTURE = str(Path(__file__).resolve().parents[1].joinpath("mcp_fixture_server.py"))
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def stop_servers() -> Iterator[None]:
    yield
    registry.close_all()


def project(root: Path) -> Path:
    servers = {"mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE]}}}
    return write(root, {"tools.yaml": "tools:\n  local:\n    type: fetch\n    description: A local tool.\n",
                        "config/mcp.yaml": json.dumps(servers)})


async def asked_run(client: httpx.AsyncClient) -> tuple[str, str]:
    """The run of the call to fx_ask that waits for an answer, and its pending call id."""
    for _ in range(1000):
        for run in (await client.get("/v1/runs")).json():
            if run["name"] == "fx_ask" and run.get("pending_approvals"):
                return run["id"], run["pending_approvals"][0]
        await asyncio.sleep(0.02)
    raise AssertionError("fx_ask never asked")


def answer_over_http(root: Path, answers: list[dict[str, Any]]) -> tuple[list[httpx.Response], Any, list[dict[str, Any]]]:
    """Call fx_ask over HTTP, post `answers` in turn to its pending question: the replies, the
    call's result, and the run's `input_required` events."""
    from engine.server.app import create_app

    engine = Engine.from_dir(root, store=root / "runs.db")
    app = create_app(engine, api_keys="", mcp=False, approval_timeout=30)

    async def go() -> tuple[list[httpx.Response], Any, list[dict[str, Any]]]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=30) as client:
                calling = asyncio.ensure_future(client.post("/v1/tools/fx_ask/call", json={}))
                run_id, call_id = await asked_run(client)
                replies = [await client.post(f"/v1/runs/{run_id}/approvals/{call_id}", json=body) for body in answers]
                result = (await asyncio.wait_for(calling, 30)).json()
                events = (await client.get(f"/v1/runs/{run_id}/events", headers={"Accept": "application/json"})).json()
        return replies, result, [e for e in events if e["type"] == "input_required"]

    try:
        return asyncio.run(go())
    finally:
        engine.close()


def test_values_answer_an_elicitation_over_http_and_bad_ones_are_422_naming_the_field(tmp_path: Path) -> None:
    replies, result, asked = answer_over_http(project(tmp_path), [
        {"approve": True, "values": {"shade": "dark"}},
        {"approve": False, "values": {"color": "red"}},
        {"approve": True, "values": {"color": "green", "shade": 7}},
        {"approve": True, "values": {"color": "late"}},
    ])
    bad_type, declined_with_values, good, late = replies
    assert bad_type.status_code == 422 and bad_type.json()["error"]["details"]["field"] == "shade", bad_type.text
    assert "values.shade" in bad_type.json()["error"]["message"]
    assert declined_with_values.status_code == 422 and declined_with_values.json()["error"]["details"]["field"] == "values"
    assert good.status_code == 200, good.text
    assert late.status_code == 409 and late.json()["error"]["code"] == "not_pending"
    assert result["data"] == {"result": "accept: green/7"}
    assert asked[0]["data"]["requested_schema"]["properties"]["shade"]["default"] == 3


def test_the_defaults_fill_the_fields_an_http_answer_leaves_out(tmp_path: Path) -> None:
    replies, result, _ = answer_over_http(project(tmp_path), [{"approve": True, "values": {"color": "red"}}])
    assert replies[0].status_code == 200 and result["data"] == {"result": "accept: red/3"}
    replies, result, _ = answer_over_http(project(tmp_path / "plain"), [{"approve": True}])  # as before: the defaults
    assert replies[0].status_code == 200 and result["data"] == {"result": "accept: blue/3"}


class Terminal(io.StringIO):
    """Typed lines on a terminal (input() reads them; isatty says there is one)."""

    def isatty(self) -> bool:
        return True


def test_a_terminal_is_asked_field_by_field_and_without_one_yes_takes_the_defaults(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path)
    monkeypatch.setattr(sys, "stdin", Terminal("y\npurple\nlots\n9\n"))  # "lots" is no integer: asked again
    assert main(["call", "fx_ask", "--dir", str(root), "--no-store", "--quiet"]) == 0
    typed = capsys.readouterr()
    prompts, _, printed = typed.out.partition("{")  # input() writes its prompts to stdout
    assert json.loads("{" + printed) == {"result": "accept: purple/9"}
    assert prompts.count("shade") == 2 and 'default "blue"' in prompts
    assert "shade: expected a whole number" in typed.err and "MCP server 'fx' asks: Which colour?" in typed.err
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # no terminal
    assert main(["call", "fx_ask", "--dir", str(root), "--no-store", "--quiet", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out) == {"result": "accept: blue/3"}
    assert main(["call", "fx_ask", "--dir", str(root), "--no-store", "--quiet"]) == 0  # nobody to ask: declined
    assert json.loads(capsys.readouterr().out) == {"result": "decline: -"}
