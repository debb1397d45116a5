"""Sessions that outlive their process (issue 31 §4): a session survives a restart of
`skillyard serve` (SQLite), and continues on a second replica sharing a PostgreSQL store,
where two replicas' turns of one session never interleave. Real processes and a real
PostgreSQL: the slow tier."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.errors import SessionError
from engine.runtime.agent import AgentLimits
from fake_llm_servers import WIRES, FakeServer, write_project
from server_helpers import running_server

WIRE = WIRES["openai"]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def root(tmp_path: Path, model_server: FakeServer) -> Path:
    model_server.reset()
    return write_project(tmp_path / "project", {"fake": WIRE.model_entry(model_server.url)})


def _ask(url: str, prompt: str) -> dict[str, Any]:
    answer = httpx.post(f"{url}/v1/agent", json={"messages": prompt, "session_id": "kept"},
                        headers={"Accept": "application/json"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_a_session_survives_a_restart_of_serve(root: Path, model_server: FakeServer) -> None:
    model_server.script(WIRE.reply("first answer"), WIRE.reply("second answer"))
    with running_server(root, keys=None) as server:
        assert _ask(server.url, "first question")["answer"] == "first answer"
    with running_server(root, keys=None) as server:
        assert _ask(server.url, "second question")["answer"] == "second answer"
        stored = httpx.get(f"{server.url}/v1/sessions/kept", timeout=10).json()
    assert [m["content"] for m in model_server.bodies[1]["messages"]] == ["first question", "first answer", "second question"]
    assert stored["turns"] == 2 and len(stored["runs"]) == 2


def test_a_session_continues_on_a_second_replica_and_turns_never_interleave(root: Path, model_server: FakeServer,
                                                                            pg_url: str) -> None:
    model_server.script(WIRE.reply("one"), WIRE.reply("slow", delay=0.8), WIRE.reply("three"))
    first, second = Engine.from_dir(root, store=pg_url), Engine.from_dir(root, store=pg_url)
    limits = AgentLimits(total_timeout=10)
    try:
        asyncio.run(first.agent("fake", limits=limits).run("q1", session="shared"))

        async def at_once() -> tuple[Any, Any]:
            slow = asyncio.ensure_future(second.agent("fake", limits=limits).run("q2", session="shared"))
            await asyncio.sleep(0.3)
            other = await asyncio.gather(first.agent("fake", limits=limits).run("q-x", session="shared"),
                                         return_exceptions=True)
            return await slow, other[0]

        slow, refused = asyncio.run(at_once())
        assert slow.answer == "slow"
        assert isinstance(refused, SessionError) and refused.code == "session_busy"
        asyncio.run(first.agent("fake", limits=limits).run("q3", session="shared"))
        assert [m["content"] for m in model_server.bodies[2]["messages"]] == ["q1", "one", "q2", "slow", "q3"]
        messages = second.sessions.get("shared")["messages"]
        assert [m["content"] for m in messages] == ["q1", "one", "q2", "slow", "q3", "three"]
    finally:
        first.close()
        second.close()
