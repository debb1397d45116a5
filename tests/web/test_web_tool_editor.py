"""The tool editor on the page (issue 32 §3), in headless Chromium against a real `skillyard
serve`: New tool with the type's own fields, live parameter validation and the caller's form
preview, Test of a draft (nothing stored), errors at their field, save → call → edit → call,
a YAML tool overridden and reset to YAML, Delete.

One server and one browser for the module; the steps share the server's state, in order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

import httpx  # noqa: E402

from server_helpers import ServerProcess, running_server  # noqa: E402
from test_web_ui import CHROMIUM, browser  # noqa: E402,F401 - browser: one Chromium per module

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")]

TOOLS = """
tools:
  shout:
    description: Upper-case a text.
    type: python
    config: {function: "helpers:shout"}
"""
HELPERS = """
def shout(text: str) -> str:
    return text.upper()

def whisper(text: str) -> str:
    return text.lower()

def twice(text: str) -> str:
    return text * 2
"""
PARAMETERS = {"type": "object", "properties": {"text": {"type": "string", "description": "What to say."}}, "required": ["text"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("editor")
    (root / "tools.yaml").write_text(TOOLS)
    (root / "helpers.py").write_text(HELPERS)
    (root / "config").mkdir()
    (root / "config" / "engine.yaml").write_text("server:\n  allow_code_tools: true\n")
    with running_server(root, keys=None) as process:  # loopback, no keys: admin
        yield process


@pytest.fixture(scope="module")
def page(browser: Any, server: ServerProcess) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("dialog", lambda dialog: dialog.accept())  # Delete asks first
    page.goto(f"{server.url}/")
    page.wait_for_selector("body[data-ready=true]", timeout=15000)
    yield page
    context.close()
    assert not errors, errors


def call(server: ServerProcess, tool: str, text: str) -> Any:
    answer = httpx.post(f"{server.url}/v1/tools/{tool}/call", json={"text": text}, timeout=30).json()
    assert answer["ok"], answer
    return answer["data"]


def admin_tools(server: ServerProcess) -> dict[str, Any]:
    return {tool["name"]: tool for tool in httpx.get(f"{server.url}/v1/admin/tools", timeout=10).json()}


def test_new_tool_with_type_fields_live_schema_preview_and_a_test_run(page: Any, server: ServerProcess) -> None:
    page.click("#new-tool")
    page.wait_for_selector("#tool-editor:not([hidden])")
    page.fill("#ed-name", "echo")
    page.fill("#ed-title", "Echo twice")
    page.fill("#ed-description", "Say it twice.")
    page.select_option("#ed-type", "python")
    page.fill("#cfg-function", "helpers:twice")  # the type's own field, from its config schema
    assert json.loads(page.input_value("#ed-config")) == {"function": "helpers:twice"}
    page.fill("#ed-parameters", '{"type": "object", "properties": ')  # live validation as it is typed
    assert "not valid JSON" in page.text_content("#ed-parameters-error")
    page.fill("#ed-parameters", json.dumps(PARAMETERS))
    assert page.is_hidden("#ed-parameters-error")
    assert page.text_content("label[for=preview-text]").startswith("text")  # the caller's form
    page.fill("#preview-text", "ab")
    page.click("#ed-test")
    page.wait_for_selector("#ed-test-result[data-ok=true]")
    assert "abab" in page.text_content("#ed-test-result")
    assert "echo" not in admin_tools(server)  # a test stores nothing


def test_errors_show_at_their_field_then_save_and_call(page: Any, server: ServerProcess) -> None:
    page.fill("#cfg-function", "helpers:nope")
    page.click("#ed-save")
    page.wait_for_selector("#cfg-function-error:not([hidden])")
    assert "nope" in page.text_content("#cfg-function-error")
    assert "echo" not in admin_tools(server)
    page.fill("#cfg-function", "helpers:twice")
    page.click("#ed-save")
    page.wait_for_selector("#tool-detail:not([hidden])")
    assert page.text_content("#tool-title") == "Echo twice"
    assert page.text_content("#tool-list li[data-tool=echo] .name") == "Echo twice"
    assert call(server, "echo", "ab") == "abab"


def test_edit_then_call(page: Any, server: ServerProcess) -> None:
    page.click("#tool-list li[data-tool=echo]")
    page.click("#edit-tool")
    page.wait_for_selector("#tool-editor:not([hidden])")
    assert page.input_value("#cfg-function") == "helpers:twice" and page.input_value("#ed-title") == "Echo twice"
    assert page.is_disabled("#ed-name") and page.is_visible("#ed-delete") and page.is_hidden("#ed-reset")
    page.fill("#cfg-function", "helpers:whisper")
    page.fill("#ed-title", "Echo quietly")
    page.click("#ed-save")
    page.wait_for_selector("#tool-detail:not([hidden])")
    assert page.text_content("#tool-title") == "Echo quietly"
    assert call(server, "echo", "AbC") == "abc"
    stored = admin_tools(server)["echo"]
    assert stored["updated_at"] >= stored["created_at"] > 0


def test_a_yaml_tool_overridden_then_reset_to_yaml(page: Any, server: ServerProcess) -> None:
    page.click("#tool-list li[data-tool=shout]")
    page.click("#edit-tool")
    page.wait_for_selector("#tool-editor:not([hidden])")
    assert page.is_disabled("#ed-type") and page.is_hidden("#ed-delete")
    page.fill("#cfg-function", "helpers:whisper")
    page.fill("#ed-title", "Shout, softly")
    page.click("#ed-save")
    page.wait_for_selector("#tool-detail:not([hidden])")
    assert call(server, "shout", "AbC") == "abc"
    page.click("#edit-tool")
    page.wait_for_selector("#ed-reset:not([hidden])")
    page.click("#ed-reset")
    page.wait_for_selector("#tool-detail:not([hidden])")
    page.wait_for_function("document.querySelector('#tool-title').textContent === 'shout'")
    assert call(server, "shout", "AbC") == "ABC"
    assert admin_tools(server)["shout"]["overrides"] == {}


def test_delete_a_stored_tool(page: Any, server: ServerProcess) -> None:
    page.click("#tool-list li[data-tool=echo]")
    page.click("#edit-tool")
    page.wait_for_selector("#ed-delete:not([hidden])")
    page.click("#ed-delete")
    page.wait_for_selector("#tool-list li[data-tool=echo]", state="detached")
    assert "echo" not in admin_tools(server)
