"""Sessions (issue 31 §1): a named conversation kept in the run store, continued turn after
turn, through the real providers (the `openai` SDK, and the Anthropic provider) against
loopback servers that record what they are sent; the OpenAI chat format of the transcript;
its consistency check; trimming to agent.max_history_tokens; two turns at once; a cut turn.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine import Engine
from engine.errors import SessionError
from engine.providers.base import ChatMessage, ToolCall
from engine.runtime.agent import AgentLimits
from engine.runtime.turns import parse_messages, trim_history
from fake_llm_servers import WIRES, FakeServer, call, write_project

QUICK = AgentLimits(total_timeout=30)  # the first use of an SDK imports it (seconds on a busy machine)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FakeServer]]:
    with FakeServer() as openai_server, FakeServer() as anthropic_server:
        yield {"openai": openai_server, "anthropic": anthropic_server}


@pytest.fixture(params=sorted(WIRES))
def wire(request: pytest.FixtureRequest) -> Any:
    return WIRES[request.param]


@pytest.fixture
def server(servers: dict[str, FakeServer], wire: Any) -> FakeServer:
    server = servers[wire.name]
    server.reset()
    return server


@pytest.fixture
def project(tmp_path: Path, server: FakeServer, wire: Any) -> Path:
    return write_project(tmp_path / "project", {"fake": wire.model_entry(server.url)})


def open_engine(project: Path) -> Engine:
    return Engine.from_dir(project, store=project / "runs.db")


def turn(engine: Engine, prompt: str, session: str | None = "s1", limits: AgentLimits = QUICK, **options: Any) -> Any:
    agent = engine.agent("fake", limits=limits)
    return asyncio.run(asyncio.wait_for(agent.run(prompt, session=session, **options), 40))


def _texts(wire: Any, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, what) of each message of a recorded request, in either wire format."""
    out = []
    for message in body["messages"]:
        content = message.get("content")
        if wire.name == "openai":
            if message["role"] == "tool":
                out.append(("tool", message["tool_call_id"]))
            elif message.get("tool_calls"):
                out += [("call", c["id"]) for c in message["tool_calls"]]
            else:
                out.append((message["role"], content))
            continue
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            kind = block["type"]
            if kind == "text":
                out.append((message["role"], block["text"]))
            elif kind == "tool_use":
                out.append(("call", block["id"]))
            elif kind == "tool_result":
                out.append(("tool", block["tool_use_id"]))
    return out


def test_second_turn_sends_the_whole_first_turn_in_order(project: Path, server: FakeServer, wire: Any) -> None:
    server.script(wire.reply("", [call("c1", "echo", {"name": "Ada"})]), wire.reply("Hello Ada."), wire.reply("Twice."))
    engine = open_engine(project)
    first = turn(engine, "greet Ada")
    assert first.stop_reason == "answer" and first.session_id == "s1"
    assert [m.role for m in first.messages] == ["user", "assistant", "tool", "assistant"]  # the answer included
    assert first.messages[-1].content == "Hello Ada."
    engine.close()

    engine = open_engine(project)  # another Engine on the same store: as a second process would
    second = turn(engine, "again?")
    engine.close()
    assert second.answer == "Twice."
    sent = _texts(wire, server.bodies[2])
    assert sent == [("user", "greet Ada"), ("call", "c1"), ("tool", "c1"), ("assistant", "Hello Ada."), ("user", "again?")]
    results = wire.tool_results(server.bodies[2])
    assert '"name": "Ada"' in results["c1"] or "Ada" in results["c1"]  # what the model read of the result

    engine = open_engine(project)
    stored = engine.sessions.get("s1")
    assert stored is not None and stored["turns"] == 2 and stored["runs"] == [first.run_id, second.run_id]
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert stored["messages"][1]["tool_calls"][0]["function"]["name"] == "echo"
    assert stored["messages"][2]["tool_call_id"] == "c1"
    assert [s["id"] for s in engine.sessions.list()] == ["s1"]
    assert engine.sessions.delete("s1") and engine.sessions.get("s1") is None and not engine.sessions.delete("s1")
    engine.close()


def test_result_messages_are_the_openai_chat_format_and_feed_back(project: Path, server: FakeServer, wire: Any) -> None:
    server.script(wire.reply("", [call("c1", "echo", {"name": "Ada"})]), wire.reply("Done."), wire.reply("Again."))
    engine = open_engine(project)
    first = turn(engine, "greet Ada", session=None)
    fed = first.to_dict()["messages"]
    assert fed[1] == {"role": "assistant", "content": None,
                      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"name": "Ada"}'}}]}
    assert fed[2]["role"] == "tool" and fed[2]["tool_call_id"] == "c1" and fed[-1] == {"role": "assistant", "content": "Done."}
    second = turn(engine, [*json.loads(json.dumps(fed)), {"role": "user", "content": "more"}], session=None)
    engine.close()
    assert second.answer == "Again."
    assert _texts(wire, server.bodies[2])[-2:] == [("assistant", "Done."), ("user", "more")]


def test_inconsistent_history_names_the_index() -> None:
    with pytest.raises(ValueError, match=r"messages\[1\].*'x'"):
        parse_messages([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "1"}])
    with pytest.raises(ValueError, match=r"messages\[2\].*'c1' of messages\[1\]"):
        parse_messages([{"role": "user", "content": "hi"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]},
                        {"role": "user", "content": "and?"}])


def test_trimming_drops_whole_turns_and_keeps_call_result_pairs() -> None:
    big = "x" * 400
    history = [ChatMessage("system", "be brief")]
    for n in range(3):
        history += [ChatMessage("user", f"q{n} {big}"), ChatMessage("assistant", "", tool_calls=(ToolCall(f"c{n}", "echo", "{}"),)),
                    ChatMessage("tool", big, tool_call_id=f"c{n}"), ChatMessage("assistant", f"a{n}")]
    history.append(ChatMessage("user", "now"))
    kept, turns, tokens = trim_history(history, 300)
    assert turns == 2 and tokens > 0
    assert kept[0].role == "system" and kept[1].content.startswith("q2") and kept[-1].content == "now"
    parse_messages(kept)  # still consistent: no call without its result


def test_history_trimmed_event_and_request(project: Path, server: FakeServer, wire: Any) -> None:
    server.script(wire.reply("one " * 300), wire.reply("two"), wire.reply("three"))
    engine = open_engine(project)
    turn(engine, "first " * 300)
    turn(engine, "second")
    events: list[Any] = []
    limits = AgentLimits(total_timeout=30, max_history_tokens=200)
    turn(engine, "third", limits=limits, on_event=events.append)
    engine.close()
    [trimmed] = [e for e in events if e.type == "history_trimmed"]
    assert trimmed.data["turns"] == 1 and trimmed.data["tokens"] > 300
    assert _texts(wire, server.bodies[2]) == [("user", "second"), ("assistant", "two"), ("user", "third")]


def test_two_turns_at_once_the_second_is_busy(project: Path, server: FakeServer, wire: Any) -> None:
    server.script(wire.reply("slow", delay=0.6), wire.reply("next"))
    engine = open_engine(project)
    agent = engine.agent("fake", limits=QUICK)

    async def both() -> tuple[Any, BaseException | Any]:
        first = asyncio.ensure_future(agent.run("one", session="s1"))
        await asyncio.sleep(0.2)
        second = await asyncio.gather(agent.run("two", session="s1"), return_exceptions=True)
        return await first, second[0]

    first, second = asyncio.run(both())
    assert first.answer == "slow"
    assert isinstance(second, SessionError) and second.code == "session_busy"
    assert turn(engine, "three").answer == "next"  # the session is free again
    assert [m["content"] for m in engine.sessions.get("s1")["messages"]] == ["one", "slow", "three", "next"]
    engine.close()


def test_a_cut_turn_leaves_the_session_at_its_last_complete_turn(project: Path, server: FakeServer, wire: Any) -> None:
    server.script(wire.reply("kept"), wire.reply("never", delay=3))
    engine = open_engine(project)
    turn(engine, "one")
    agent = engine.agent("fake", limits=QUICK)
    with pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(agent.run("two", session="s1"), 0.5))
    stored = engine.sessions.get("s1")
    assert stored["turns"] == 1 and not stored["busy"]
    assert [m["content"] for m in stored["messages"]] == ["one", "kept"]
    engine.close()


def test_secret_never_reaches_session_rows(project: Path, server: FakeServer, wire: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "hunter2-planted-9f3a"
    server.script(wire.reply("", [call("c1", "echo", {"name": "Ada", "password": secret})]),
                  wire.reply(f"your password is {secret}"))
    engine = open_engine(project)
    turn(engine, "log in")
    engine.close()
    rows = sqlite3.connect(project / "runs.db").execute("SELECT message FROM session_messages").fetchall()
    assert rows and not any(secret in row[0] for row in rows)
    assert any("[REDACTED]" in row[0] for row in rows)


def test_without_a_store_sessions_say_how_to_get_one(project: Path) -> None:
    from engine.errors import UsageError

    engine = Engine.from_dir(project)
    with pytest.raises(UsageError, match="store=True"):
        engine.sessions.list()
