"""Sessions over HTTP (issue 31 §1): POST /v1/agent's `session_id`, GET/DELETE /v1/sessions,
a full OpenAI-format history in `messages`, 404 for another caller's session, 409 when busy.
In process, through httpx's ASGITransport, the model a loopback OpenAI server driven by the
real `openai` SDK.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from fake_llm_servers import WIRES, FakeServer, call, write_project

ALICE = "alice-key-0123456789abcdef0123456789ab"
BOB = "bob-key-0123456789abcdef0123456789abcd"
WIRE = WIRES["openai"]


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def app(tmp_path: Path, model_server: FakeServer) -> Iterator[Any]:
    from engine.server import create_app

    model_server.reset()
    root = write_project(tmp_path / "project", {"fake": WIRE.model_entry(model_server.url)})
    engine = Engine.from_dir(root, store=root / "runs.db")
    yield create_app(engine, api_keys=f"alice:caller:{ALICE},bob:caller:{BOB}", mcp=False)
    engine.close()


async def _send(app: Any, method: str, url: str, key: str = ALICE, **kwargs: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=10) as client:
        headers = {"Authorization": f"Bearer {key}", "Accept": "application/json", **kwargs.pop("headers", {})}
        return await client.request(method, url, headers=headers, **kwargs)


def send(app: Any, method: str, url: str, key: str = ALICE, **kwargs: Any) -> httpx.Response:
    return asyncio.run(_send(app, method, url, key, **kwargs))


def test_a_session_over_http(app: Any, model_server: FakeServer) -> None:
    model_server.script(WIRE.reply("", [call("c1", "echo", {"name": "Ada"})]), WIRE.reply("Hello Ada."), WIRE.reply("Again."))
    first = send(app, "POST", "/v1/agent", json={"messages": "greet Ada", "session_id": "chat-1"})
    assert first.status_code == 200, first.text
    assert first.json()["session_id"] == "chat-1" and first.json()["messages"][-1]["content"] == "Hello Ada."
    second = send(app, "POST", "/v1/agent", json={"messages": "again", "session_id": "chat-1"})
    assert second.json()["answer"] == "Again."
    sent = model_server.bodies[2]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["id"] == "c1" and sent[2]["tool_call_id"] == "c1"

    listed = send(app, "GET", "/v1/sessions").json()
    assert [(s["id"], s["turns"]) for s in listed] == [("chat-1", 2)]
    got = send(app, "GET", "/v1/sessions/chat-1").json()
    assert got["id"] == "chat-1" and got["runs"] == [first.json()["run_id"], second.json()["run_id"]]
    assert [m["role"] for m in got["messages"]] == ["user", "assistant", "tool", "assistant", "user", "assistant"]

    # another caller: none of it read, listed or deleted (its own `chat-1` is another session: test_session_owners.py)
    assert send(app, "GET", "/v1/sessions/chat-1", key=BOB).status_code == 404
    assert send(app, "GET", "/v1/sessions", key=BOB).json() == []
    assert send(app, "DELETE", "/v1/sessions/chat-1", key=BOB).status_code == 404

    assert send(app, "DELETE", "/v1/sessions/chat-1").status_code == 204
    assert send(app, "GET", "/v1/sessions/chat-1").status_code == 404


def test_agent_start_carries_the_session_id(app: Any, model_server: FakeServer) -> None:
    model_server.script(WIRE.reply("hi"))
    answer = send(app, "POST", "/v1/agent", json={"messages": "hello", "session_id": "s-sse"},
                  headers={"Accept": "text/event-stream"})
    frames = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")]
    start = next(f for f in frames if f.get("type") == "agent_start")
    assert start["data"]["session_id"] == "s-sse"


def test_a_full_openai_history_is_taken(app: Any, model_server: FakeServer) -> None:
    model_server.script(WIRE.reply("Seen."))
    history = [
        {"role": "user", "content": "greet Ada"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "echo", "arguments": "{\"name\": \"Ada\"}"}}]},
        {"role": "tool", "tool_call_id": "c9", "content": "{\"name\": \"Ada\"}"},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "and now?"},
    ]
    fed_back = [*history[:3], {**history[3], "refusal": None, "annotations": []}, history[4]]  # as an SDK dumps it
    answer = send(app, "POST", "/v1/agent", json={"messages": fed_back})
    assert answer.status_code == 200, answer.text
    assert model_server.bodies[0]["messages"] == history


@pytest.mark.parametrize("messages, index", [
    ([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}], 1),
    ([{"role": "user", "content": "hi"},
      {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]},
      {"role": "user", "content": "next"}], 2),
])
def test_an_inconsistent_history_is_a_422_naming_the_index(app: Any, messages: list[Any], index: int) -> None:
    answer = send(app, "POST", "/v1/agent", json={"messages": messages})
    assert answer.status_code == 422
    assert f"messages[{index}]" in answer.json()["error"]["message"]


def test_a_busy_session_is_409(app: Any, model_server: FakeServer) -> None:
    model_server.script(WIRE.reply("slow", delay=0.8), WIRE.reply("after"))

    async def both() -> tuple[httpx.Response, httpx.Response]:
        first = asyncio.ensure_future(_send(app, "POST", "/v1/agent", json={"messages": "one", "session_id": "b"}))
        await asyncio.sleep(0.3)
        second = await _send(app, "POST", "/v1/agent", json={"messages": "two", "session_id": "b"})
        return await first, second

    first, second = asyncio.run(both())
    assert first.status_code == 200 and second.status_code == 409
    assert second.json()["error"]["code"] == "session_busy"
    assert send(app, "POST", "/v1/agent", json={"messages": "three", "session_id": "b"}).json()["answer"] == "after"
