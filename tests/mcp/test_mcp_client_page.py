"""Issue 32 §1: the page answers an MCP server's question (elicitation) with a form generated
from the requested schema, in headless Chromium against a real `skillyard serve` whose project
uses tests/mcp_fixture_server.py (its `ask` tool wants `{color: str = "blue", shade: int = 3}`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

from secrets_support import write  # noqa: E402
from server_helpers import ServerProcess, running_server  # noqa: E402
from test_web_ui import ARGS, CHROMIUM  # noqa: E402

FIXTURE = str(Path(__file__).resolve().parents[1].joinpath("mcp_fixture_server.py"))
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = write(tmp_path_factory.mktemp("elicit"), {
        "tools.yaml": "tools:\n  local:\n    type: fetch\n    description: A local tool.\n",
        "config/mcp.yaml": json.dumps({"mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE]}}}),
    })
    with running_server(root, keys=None, extra=("--approval-timeout", "30")) as process:  # loopback, no keys: admin
        yield process


@pytest.fixture
def page(server: ServerProcess) -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            page.goto(f"{server.url}/")
            page.wait_for_selector("body[data-ready=true]", timeout=15000)
            yield page
        finally:
            browser.close()
        assert not errors, errors


def ask(page: Any) -> Any:
    page.click("#tool-list li[data-tool=fx_ask]")
    page.click("#run-tool")
    page.wait_for_selector("#tool-timeline .elicit", timeout=15000)
    return page.locator("#tool-timeline .elicit")


def test_the_page_shows_a_form_from_the_requested_schema_and_sends_its_values(page: Any) -> None:
    box = ask(page)
    assert "fx asks: Which colour?" in box.inner_text()
    assert box.locator("[name=color]").input_value() == "blue" and box.locator("[name=shade]").input_value() == "3"
    box.locator("[name=shade]").fill("2.5")  # a number, but not the integer the schema asks for
    box.locator("button.approve").click()
    page.wait_for_selector("#tool-timeline .elicit .field.invalid[data-field=shade]", timeout=10000)
    assert "values.shade" in box.locator(".field[data-field=shade] .field-error").inner_text()
    box.locator("[name=color]").fill("green")
    box.locator("[name=shade]").fill("7")
    box.locator("button.approve").click()
    page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=15000)
    assert "accept: green/7" in page.inner_text("#tool-result")


def test_decline_on_the_page(page: Any) -> None:
    ask(page).locator("button.deny").click()
    page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=15000)
    assert "decline: -" in page.inner_text("#tool-result")
