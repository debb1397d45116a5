"""The web chat with sessions and reasoning (issue 31 §1, §2), in headless Chromium: one session
per conversation (the model sees the earlier tool results), a reload shows the conversation, a
list of past conversations reopens one, "New conversation"; a reasoning part above the answer,
collapsed, "Thinking…" while it streams and "Thought for N s" after. The model is a loopback
OpenAI server (driven by the `openai` SDK in `skillyard serve`) that records what it is sent.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

from fake_llm_servers import WIRES, FakeServer, Reply, write_project  # noqa: E402
from server_helpers import ServerProcess, running_server  # noqa: E402

CHROMIUM = os.environ.get("SKILLYARD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
WIRE = WIRES["openai"]
THOUGHT = "The user wants Ada greeted; echo does that, so I call it."

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_server: FakeServer) -> Iterator[ServerProcess]:
    root = write_project(tmp_path_factory.mktemp("chat"), {"fake": WIRE.model_entry(model_server.url, timeout="20s")})
    with running_server(root, keys=None) as process:
        yield process


@pytest.fixture
def page(server: ServerProcess) -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{server.url}/#chat")
        page.wait_for_selector("body[data-ready=true]", timeout=20000)
        yield page
        browser.close()
        assert not errors, errors


def thinking_then_call() -> Reply:
    chunk = WIRE._chunk
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": THOUGHT[i:i + 6]}) for i in range(0, len(THOUGHT), 6)]
    events += [chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "echo", "arguments": ""}}]}),
               chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"name": "Ada"}'}}]}),
               chunk({}, "tool_calls"), chunk(None, usage=(10, 5)), b"data: [DONE]\n\n"]
    return Reply(events=events, gap=0.15)


def wait_count(page: Any, selector: str, count: int, timeout: float = 30.0) -> None:
    """Until `selector` matches `count` nodes (the page's CSP allows no evaluated strings)."""
    deadline = time.monotonic() + timeout
    while page.locator(selector).count() != count:
        assert time.monotonic() < deadline, f"{selector}: {page.locator(selector).count()} != {count}"
        page.wait_for_timeout(100)


def send(page: Any, text: str, answers: int) -> None:
    page.fill("#chat-text", text)
    page.click("#chat-send")
    wait_count(page, ".msg-assistant[data-stop-reason=answer]", answers)


def test_conversations_are_sessions_with_their_reasoning(page: Any, server: ServerProcess, model_server: FakeServer) -> None:
    model_server.reset()
    model_server.script(thinking_then_call(), WIRE.reply("Hello Ada."), WIRE.reply("Again, Ada."), WIRE.reply("Fresh start."))
    page.fill("#chat-text", "greet Ada")
    page.click("#chat-send")
    page.wait_for_selector(".part-reasoning[data-state=thinking]", timeout=20000)
    assert page.inner_text(".part-reasoning > summary") == "Thinking…"
    page.wait_for_selector(".msg-assistant[data-stop-reason=answer]", timeout=30000)
    reasoning = page.locator(".part-reasoning")
    assert reasoning.count() == 1  # the deltas merged into one part
    assert reasoning.get_attribute("open") is None  # collapsed
    assert re.fullmatch(r"Thought for \d+\.\d s", page.inner_text(".part-reasoning > summary"))
    assert page.text_content(".part-reasoning .reasoning-text") == THOUGHT
    assert page.get_attribute(".part-tool", "data-state") == "result"

    send(page, "once more", 2)
    second = model_server.bodies[2]["messages"]  # the model saw the first turn, its tool call and result included
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "assistant", "user"]
    assert second[2]["tool_call_id"] == "c1" and "Ada" in second[2]["content"]

    page.reload()  # the conversation comes back from the server
    page.wait_for_selector("body[data-ready=true]", timeout=20000)
    page.wait_for_selector("#chat-messages .msg-user")
    assert page.eval_on_selector_all("#chat-messages .msg-user", "l => l.map(n => n.textContent)") == ["greet Ada", "once more"]
    assert page.locator("#chat-messages .past-tool").count() == 2  # the call and its result, a line each
    assert "Again, Ada." in page.inner_text("#chat-messages")
    first_id = page.get_attribute("#chat-messages", "data-session-id")
    assert page.locator("#chat-sessions li[data-session-id]").count() == 1

    page.click("#chat-clear")  # New conversation
    assert page.locator("#chat-messages > *").count() == 0
    send(page, "start over", 1)
    wait_count(page, "#chat-sessions li[data-session-id]", 2)
    assert [m["role"] for m in model_server.bodies[3]["messages"]] == ["user"]  # a new conversation starts empty

    page.click(f"#chat-sessions li[data-session-id='{first_id}'] button")  # reopen the first
    page.wait_for_selector(f"#chat-messages[data-session-id='{first_id}'] .msg-user", timeout=10000)
    assert page.eval_on_selector_all("#chat-messages .msg-user", "l => l.map(n => n.textContent)") == ["greet Ada", "once more"]
