"""Issue 32 §1: MCP servers as tool sources, against real servers in subprocesses.

The server is tests/mcp_fixture_server.py, written with the `mcp` SDK's MCPServer (FastMCP):
its tools become `fx_*` tools of a project and go through the router like any other. Also
skillyard's own `skillyard mcp`: one project's tools used by another.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.executors.mcp_client import registry
from engine.safety.redaction import REDACTED
from secrets_support import plant, skillyard, write

FIXTURE = str(Path(__file__).resolve().parents[1].joinpath("mcp_fixture_server.py"))
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def stop_servers() -> Iterator[None]:
    yield
    registry.close_all()  # no child outlives its test


def project(root: Path, servers: dict[str, Any], *, tools: str = "") -> Path:
    return write(root, {
        "tools.yaml": tools or "tools:\n  local:\n    type: fetch\n    description: A local tool.\n",
        "config/mcp.yaml": json.dumps({"mcpServers": servers}, indent=2),
    })


def fixture_server(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [FIXTURE], **extra}


def value(result: Any) -> Any:
    """MCPServer wraps a plain return value as structuredContent `{"result": …}` (kept as the server sent it)."""
    assert result.error is None, result.error
    return result.data["result"] if isinstance(result.data, dict) else result.data


def until(check: Callable[[], bool], seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_a_servers_tools_are_tools_with_progress_parts_structured_results_and_errors(tmp_path: Path) -> None:
    engine = Engine.from_dir(project(tmp_path, {"fx": fixture_server(confirm=["ask"])}))
    events: list[Any] = []
    try:
        tools = engine.project.tools
        assert {"fx_echo", "fx_slow", "fx_picture", "fx_add", "fx_fail", "local"} <= set(tools)
        assert tools["fx_add"].parameters["required"] == ["a", "b"] and tools["fx_ask"].confirm
        assert value(engine.call_tool_sync("fx_echo", {"text": "hi"})) == "hi"
        assert engine.call_tool_sync("fx_echo", {}).error.code == "invalid_arguments"  # the router's schema check
        assert engine.call_tool_sync("fx_add", {"a": 2, "b": 3}).data == {"total": 5}  # structuredContent
        slow = engine.call_tool_sync("fx_slow", {"steps": 2}, on_event=events.append)
        picture = engine.call_tool_sync("fx_picture", {}).data
        failed = engine.call_tool_sync("fx_fail", {})
    finally:
        engine.close()
    assert value(slow) == "counted to 2"
    progress = [e.data for e in events if e.type == "tool_progress_delta" and e.data["stage"] in ("progress", "log")]
    assert {"stage": "progress", "message": "step 2 of 2", "progress": 2.0, "total": 2.0} in progress
    assert {"stage": "log", "message": "working on step 1", "level": "info"} in [{k: v for k, v in p.items() if k != "logger"} for p in progress]
    assert picture["content"][0] == {"type": "text", "text": "a dot"}
    assert picture["content"][1]["type"] == "image" and picture["content"][1]["mimeType"] == "image/png"
    assert failed.error.code == "execution_error" and "fail" in failed.error.message


def test_a_timeout_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled.txt"
    root = project(tmp_path / "p", {"fx": fixture_server(timeout="1s", env={"FIXTURE_MARKER": str(marker)})})
    engine = Engine.from_dir(root)
    try:
        started = time.monotonic()
        result = engine.call_tool_sync("fx_wait_forever", {})
        assert result.error.code == "timeout" and time.monotonic() - started < 5
        assert until(marker.exists, 10) and marker.read_text() == "cancelled"  # notifications/cancelled reached it
        assert value(engine.call_tool_sync("fx_echo", {"text": "still here"})) == "still here"
    finally:
        engine.close()


def test_a_crash_mid_call_fails_that_call_and_the_server_comes_back(tmp_path: Path) -> None:
    engine = Engine.from_dir(project(tmp_path, {"fx": fixture_server()}))
    try:
        crashed = engine.call_tool_sync("fx_crash", {})
        assert crashed.error is not None and crashed.error.code in ("execution_error", "config_error")
        assert until(lambda: engine.call_tool_sync("fx_echo", {"text": "back"}).data == {"result": "back"}, 20)
    finally:
        engine.close()


def test_a_server_that_cannot_start_breaks_only_its_own_tools(tmp_path: Path) -> None:
    from engine.link.linker import load_project
    from engine.server.app import create_app

    servers = {"fx": fixture_server(), "gone": {"command": str(tmp_path / "no-such-program"), "startup_timeout": "5s"}}
    engine = Engine.from_project(load_project(project(tmp_path, servers), isolate_broken_tools=True))

    async def ready() -> httpx.Response:
        app = create_app(engine, api_keys="", mcp=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http:
            return await http.get("/readyz")

    try:
        assert set(engine.project.broken) == {"gone_*"}
        [issue] = engine.project.broken["gone_*"]
        assert "gone" in issue.message and "not available" in issue.message and issue.location.file == "config/mcp.yaml"
        assert value(engine.call_tool_sync("fx_echo", {"text": "ok"})) == "ok"
        assert asyncio.run(ready()).json()["status"] == "degraded"
    finally:
        engine.close()
    assert main(["mcp", "list", "--dir", str(tmp_path)]) == 1  # one server is not ready


def test_list_changed_relinks_the_servers_tools(tmp_path: Path) -> None:
    engine = Engine.from_dir(project(tmp_path, {"fx": fixture_server()}))
    try:
        assert "fx_late" not in engine.project.tools
        assert value(engine.call_tool_sync("fx_grow", {})) == "grown"
        assert until(lambda: "fx_late" in engine.project.tools)
        assert value(engine.call_tool_sync("fx_late", {})) == "late tool here"
    finally:
        engine.close()


def test_elicitation_is_answered_like_an_approval_and_declined_with_no_one_to_ask(tmp_path: Path) -> None:
    engine = Engine.from_dir(project(tmp_path, {"fx": fixture_server()}))
    events: list[Any] = []
    asked: list[Any] = []

    async def approve(tool: Any, args: dict[str, Any], call_id: str) -> bool:
        asked.append((tool.name, args["message"]))
        return True

    try:
        accepted = asyncio.run(engine.call_tool("fx_ask", {}, approve=approve, on_event=events.append))
        declined = engine.call_tool_sync("fx_ask", {})
    finally:
        engine.close()
    assert value(accepted) == "accept: blue/3"  # the requested schema's defaults
    assert asked == [("fx_ask", "Which colour?")]
    [question] = [e.data for e in events if e.type == "input_required"]
    assert question["requested_schema"]["properties"]["color"]["default"] == "blue"
    assert value(declined) == "decline: -"


def test_the_child_gets_only_its_env_and_its_stderr_reaches_the_log_redacted(tmp_path: Path) -> None:
    parent, token = plant("parent"), plant("child-token")
    root = project(tmp_path, {"fx": fixture_server(env={"FIXTURE_TOKEN": "${env:MCP_TEST_TOKEN}"})})
    write(root, {".env": f"MCP_TEST_TOKEN={token}\n", "config/engine.yaml": "logging: {level: info}\n"})
    called = skillyard("call", "fx_env_probe", "--dir", str(root), "--no-store", cwd=root, env={"PLANTED_PARENT_SECRET": parent})
    assert called.returncode == 0, called.stderr
    assert parent not in called.stdout and '\\"planted\\": \\"absent\\"' in called.stdout
    assert "MCP server stderr" in called.stderr and f"with token {REDACTED}" in called.stderr
    assert token not in called.stderr


def test_one_projects_tools_used_by_another_through_skillyard_mcp(tmp_path: Path) -> None:
    other = write(tmp_path / "other", {
        "tools.yaml": "tools:\n  shout:\n    type: python\n    description: Upper-case a text.\n    config: {function: helpers:shout}\n",
        "helpers.py": "def shout(text: str) -> str:\n    return text.upper()\n",
    })
    server = {"command": sys.executable, "args": ["-c", "import sys; from engine.cli.main import main; sys.exit(main())",
                                                 "mcp", "--dir", str(other), "--no-store"],
              "env": {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}, "prefix": "other_"}
    engine = Engine.from_dir(project(tmp_path / "p", {"peer": server}))
    try:
        assert "other_shout" in engine.project.tools
        assert engine.call_tool_sync("other_shout", {"text": "hello"}).data in ("HELLO", {"result": "HELLO"})
    finally:
        engine.close()


def test_validate_reports_a_bad_entry_at_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write(tmp_path, {"tools.yaml": "tools:\n  local:\n    type: fetch\n    description: x\n",
                            "config/mcp.yaml": "mcpServers:\n  ok:\n    command: x\n  bad:\n    args: [a]\n  typo:\n    command: x\n    prefx: b_\n"})
    assert main(["validate", str(root)]) != 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "config/mcp.yaml:5" in text and "give either `command`" in text
    assert "config/mcp.yaml:8:5: unknown field 'prefx'" in text and "did you mean 'prefix'" in text


def test_sampling_is_answered_by_the_named_model_and_declined_without_one(tmp_path: Path) -> None:
    models = "default: mock\nmodels:\n  helper: {provider: mock, model: mock-helper}\n"
    with_model = write(project(tmp_path / "with", {"fx": fixture_server(sampling="helper")}), {"config/models.yaml": models})
    without = write(project(tmp_path / "without", {"fx": fixture_server()}), {"config/models.yaml": models})
    engine = Engine.from_dir(with_model)
    try:
        answered = value(engine.call_tool_sync("fx_summarize", {"text": "PostgreSQL replication lag"}))
    finally:
        engine.close()
    engine = Engine.from_dir(without)
    try:
        declined = value(engine.call_tool_sync("fx_summarize", {"text": "PostgreSQL replication lag"}))
    finally:
        engine.close()
    assert answered.startswith("mock-helper said: ") and "PostgreSQL" in answered, answered  # the mock answers from the prompt
    assert declined.startswith("declined: ") and "sampling is not enabled" in declined


def test_admin_enable_and_disable_apply_to_a_servers_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.server.app import create_app

    root = project(tmp_path, {"fx": fixture_server()})
    assert main(["tools", "disable", "fx_echo", "--dir", str(root)]) == 0
    assert "fx_echo: disabled, from mcp:fx" in capsys.readouterr().out
    engine = Engine.from_dir(root, store=True, stored_settings=True)

    async def admin() -> list[httpx.Response]:
        app = create_app(engine, api_keys="", mcp=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http:
            return [await http.patch("/v1/admin/tools/fx_echo", json={"enabled": True}),
                    await http.patch("/v1/admin/tools/fx_add", json={"config": {"x": 1}}),
                    await http.patch("/v1/admin/tools/fx_add", json={"enabled": False})]

    try:
        assert engine.project.tools["fx_echo"].enabled is False
        assert engine.call_tool_sync("fx_echo", {"text": "x"}).error.code == "tool_disabled"
        enabled, configured, disabled = asyncio.run(admin())
        assert enabled.status_code == 200 and enabled.json()["enabled"] is True, enabled.text
        assert value(engine.call_tool_sync("fx_echo", {"text": "back on"})) == "back on"
        assert configured.status_code == 422 and "config/mcp.yaml" in configured.json()["error"]["message"]
        assert disabled.status_code == 200 and engine.call_tool_sync("fx_add", {"a": 1, "b": 2}).error.code == "tool_disabled"
    finally:
        engine.close()
    assert main(["tools", "--dir", str(root), "--json"]) == 0
    listed = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert listed["fx_add"]["enabled"] is False and listed["fx_echo"]["enabled"] is True


def test_validate_reports_a_sampling_model_set_nowhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write(tmp_path, {"tools.yaml": "tools:\n  local:\n    type: fetch\n    description: x\n",
                            "config/models.yaml": "models:\n  helper: {provider: mock}\n",
                            "config/mcp.yaml": "mcpServers:\n  fx:\n    command: x\n    sampling: helpr\n"})
    assert main(["validate", str(root)]) != 0
    text = "".join(capsys.readouterr())
    assert "config/mcp.yaml:4" in text and "sampling model 'helpr'" in text and "did you mean 'helper'" in text
