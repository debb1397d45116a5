"""The web page, end to end in headless Chromium (Debian's `chromium`) driven by Playwright.

Skipped when /usr/bin/chromium (or $SKILLYARD_CHROMIUM) or the playwright package is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

from server_helpers import ServerProcess, running_server, write_project  # noqa: E402

CHROMIUM = os.environ.get("SKILLYARD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")]  # Chromium (and a served process)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = write_project(tmp_path_factory.mktemp("page"))
    with running_server(root, keys=None, extra=("--approval-timeout", "20")) as process:  # loopback, no keys: admin
        yield process


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, server: ServerProcess) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server.url}/")
    page.wait_for_selector("body[data-ready=true]", timeout=15000)
    yield page
    context.close()
    assert not errors, errors


def test_fill_the_form_run_a_tool_and_watch_the_timeline(page: Any) -> None:
    assert page.inner_text("#role-badge") == "local (no keys)"
    names = page.eval_on_selector_all("#tool-list li", "items => items.map(li => li.dataset.tool)")
    assert names == ["echo", "guarded", "retired", "secretTool", "slow"]  # an admin sees every tool (by order, then name)
    page.click("#tool-list li[data-tool=echo]")
    page.fill("[name=name]", "Ada Lovelace")
    page.fill("[name=count]", "3")
    page.click("#run-tool")
    page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=10000)
    assert page.get_attribute("#tool-timeline .call", "data-status") == "ok"
    assert page.get_attribute("#tool-timeline .step", "data-status") == "ok"
    assert "Ada Lovelace" in page.inner_text("#tool-result")
    assert '"count": 3' in page.inner_text("#tool-result")

    page.check("#raw-toggle")  # the server's validation errors reach the timeline
    page.fill("#raw-json", '{"name": ""}')
    page.click("#run-tool")
    page.wait_for_selector("#tool-timeline[data-last-type=tool_call_error]", timeout=10000)
    assert "invalid_arguments" in page.inner_text("#tool-timeline")


def test_live_progress_and_approval_buttons(page: Any) -> None:
    page.click("#tool-list li[data-tool=slow]")
    page.fill("[name=seconds]", "0.3")
    page.click("#run-tool")
    page.wait_for_selector("#tool-timeline .step .progress", timeout=10000)  # skill progress, live
    page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=10000)
    assert "slept 1 of" in page.inner_text("#tool-timeline")

    page.click("#tool-list li[data-tool=guarded]")
    page.fill("[name=name]", "Bo")
    page.click("#run-tool")
    page.click("#tool-timeline .approval button.approve", timeout=10000)
    page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=10000)
    assert page.get_attribute("#tool-timeline .call", "data-status") == "ok"


def test_chat_runs_the_agent_and_shows_the_tool_chain(page: Any) -> None:
    page.click(".tab[data-view=chat]")
    page.fill("#chat-text", "echo the name Grace Hopper")
    page.click("#chat-send")
    page.wait_for_selector(".msg-assistant[data-stop-reason=answer]", timeout=15000)
    assert page.get_attribute(".part-tool", "data-state") == "result"
    assert page.inner_text(".assistant-text").strip()

    page.click(".tab[data-view=runs]")
    page.wait_for_selector("#runs-body tr[data-run-id]")
    page.click("#runs-body tr[data-run-id]")  # the newest: the chat's agent run, replayed
    page.wait_for_selector("#run-timeline[data-last-type=agent_done]", timeout=10000)


def test_admin_switch_disables_a_tool(page: Any, server: ServerProcess) -> None:
    import httpx

    switch = "#tool-list li[data-tool=echo] input.switch"
    page.uncheck(switch)
    page.wait_for_selector("#tool-list li.disabled[data-tool=echo]", timeout=10000)
    assert "echo" not in [t["name"] for t in httpx.get(f"{server.url}/v1/tools?format=mcp").json()]
    page.check(switch)
    page.wait_for_selector("#tool-list li[data-tool=echo]:not(.disabled)", timeout=10000)
