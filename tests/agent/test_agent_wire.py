"""The agent loop on real HTTP: an OpenAI chat-completions server and an Anthropic Messages
server on 127.0.0.1, driven through the real providers (the `openai` SDK; httpx for
Anthropic). Every test runs against both servers.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from engine import Engine
from engine.providers.base import ChatMessage, ModelRequest
from engine.providers.registry import provider_factory
from engine.runtime.agent import AgentLimits, AgentResult
from engine.runtime.events import Event
from engine.spec.models import ModelSpec
from fake_llm_servers import SKILLS_MODULE, WIRES, FakeServer, Reply, call, seq_gap_free, write_project

QUICK = AgentLimits(total_timeout=5)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FakeServer]]:
    with FakeServer() as openai_server, FakeServer() as anthropic_server:
        servers = {"openai": openai_server, "anthropic": anthropic_server}
        _warm_up(servers)
        yield servers


def _warm_up(servers: dict[str, FakeServer]) -> None:
    """One request per wire first: the SDK's (slow) first-use imports must not count in the timings below."""
    for name, server in servers.items():
        wire = WIRES[name]
        server.script(wire.reply("warm", [call("w", "echo", {"name": "w"})]))
        factory = provider_factory(name)
        assert factory is not None
        provider = factory(ModelSpec(**wire.model_entry(server.url)), Path("."))
        request = ModelRequest((ChatMessage("user", "hi"),), tools=({"name": "echo", "description": "e", "parameters": {}},))
        asyncio.run(provider.request(request))


@pytest.fixture(params=sorted(WIRES))
def wire(request: pytest.FixtureRequest) -> Any:
    return WIRES[request.param]


@pytest.fixture
def server(servers: dict[str, FakeServer], wire: Any) -> FakeServer:
    server = servers[wire.name]
    server.reset()
    return server


@pytest.fixture
def make_engine(tmp_path: Path, server: FakeServer, wire: Any) -> Callable[..., Engine]:
    def make(**model: Any) -> Engine:
        root = write_project(tmp_path / "project", {"fake": wire.model_entry(server.url, **model)})
        return Engine.from_dir(root)

    return make


def run(engine: Engine, prompt: str = "go", *, limits: AgentLimits = QUICK, guard: float = 8.0,
        **options: Any) -> tuple[AgentResult, list[Event]]:
    """Run the agent to its stop; `guard` is an outer limit so that a bug fails, never hangs."""
    events: list[Event] = []
    agent = engine.agent("fake", limits=limits, **options)
    result = asyncio.run(asyncio.wait_for(agent.run(prompt, on_event=events.append), guard))
    return result, events


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


def first(events: list[Event], kind: str, **match: Any) -> Event:
    return next(e for e in events if e.type == kind and all(getattr(e, k) == v for k, v in match.items()))


# ─── conversations ──────────────────────────────────────────────────────────────────────


def test_two_round_tool_conversation(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(
        wire.reply("Let me check.", [call("call_1", "echo", {"name": "Ada"})], usage=(30, 7)),
        wire.reply("Hello Ada, nice to meet you!", split_at=4, usage=(60, 9)),
    )
    result, events = run(make_engine(), "Greet Ada", system="Be brief.")

    assert result.stop_reason == "answer", result.error
    assert result.answer == "Hello Ada, nice to meet you!"
    assert result.steps == 2
    assert (result.usage.input_tokens, result.usage.output_tokens) == (90, 16)
    assert [r.ok for r in result.tool_results] == [True]
    assert result.tool_results[0].data == {"name": "Ada", "count": 1}  # validated, default applied

    first_body, second_body = server.bodies
    assert sorted(wire.tool_names(first_body)) == ["deleteRecord", "echo", "nap", "sendEmail"]
    assert wire.tool_choice(first_body) == wire.expected_choice("auto")
    if wire.name == "anthropic":
        assert first_body["system"] == "Be brief."
        assert first_body["messages"] == [{"role": "user", "content": "Greet Ada"}]
        echo = wire.tool_names(first_body).index("echo")  # tools come by order, then name
        assert first_body["tools"][echo]["input_schema"]["required"] == ["name"]
        assert server.requests[0].headers["x-api-key"] == "sk-ant-test"
        assert server.requests[0].headers["anthropic-version"] == "2023-06-01"
        assert server.requests[0].path == "/v1/messages"
    else:
        assert first_body["messages"][:2] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Greet Ada"}]
        echo = wire.tool_names(first_body).index("echo")  # tools come by order, then name
        assert first_body["tools"][echo]["function"]["parameters"]["required"] == ["name"]
        assert server.requests[0].headers["authorization"] == "Bearer sk-test"
        assert server.requests[0].path == "/v1/chat/completions"
    assert wire.last_assistant_calls(second_body) == ["call_1"]
    observation = wire.tool_results(second_body)["call_1"]
    assert observation.startswith("[echo succeeded") and json.loads(observation.split("\n", 1)[1]) == {"name": "Ada", "count": 1}

    # One run, one gap-free sequence, the tool's events nested inside it.
    assert seq_gap_free(events) and {e.run_id for e in events} == {result.run_id}
    assert events[0].type == "agent_start" and events[-1].type == "agent_done"
    assert events[-1].data["stop_reason"] == "answer" and events[-1].data["steps"] == 2
    order = types(events)
    assert order.index("tool_call_start") < order.index("skill_start") < order.index("tool_call_result")
    starts = [e.seq for e in events if e.type == "model_call_start"]
    tool_events = [e for e in events if e.tool_call_id is not None]
    assert {e.tool_call_id for e in tool_events} == {"call_1"}
    assert all(starts[0] < e.seq < starts[1] for e in tool_events)
    streamed = "".join(e.data["text"] for e in events if e.type == "model_text_delta" and e.data["step"] == 2)
    assert streamed == result.answer
    assert first(events, "final_answer_delta").data["text"] == result.answer


def test_stream_yields_the_run_events(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(wire.reply("", [call("c1", "echo", {"name": "x"})]), wire.reply("done"))
    agent = make_engine().agent("fake", limits=QUICK)

    async def collect() -> list[Event]:
        return [event async for event in agent.stream("go")]

    events = asyncio.run(asyncio.wait_for(collect(), 8))
    assert events[0].type == "agent_start" and events[-1].type == "agent_done"
    assert events[-1].data["answer"] == "done" and seq_gap_free(events)


def test_arguments_split_over_many_chunks(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    long_name = "Ada Lovelace, Countess of Lovelace — “the first programmer” " * 3
    server.script(
        wire.reply("", [call("c1", "echo", {"name": long_name, "count": 2})], split_at=1),  # one character per chunk
        wire.reply("", [call("c2", "echo", {"name": "left"}), call("c3", "echo", {"name": "right", "count": 3})],
                   split_at=2, interleave=True),  # two calls' pieces interleaved
        wire.reply("ok"),
    )
    result, _ = run(make_engine())
    assert result.stop_reason == "answer", result.error
    assert [r.data for r in result.tool_results] == [
        {"name": long_name, "count": 2}, {"name": "left", "count": 1}, {"name": "right", "count": 3},
    ]
    assert [r.tool_call_id for r in result.tool_results] == ["c1", "c2", "c3"]
    assert len(server.requests[0].body["messages"]) >= 1 and len(server.requests) == 3


def test_parallel_calls_run_concurrently(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(
        wire.reply("Two naps.", [call("nap_a", "nap", {"seconds": 0.2, "label": "a"}),
                                 call("nap_b", "nap", {"seconds": 0.2, "label": "b"})]),
        wire.reply("Both done."),
    )
    marks: dict[str, float] = {}

    def clock(event: Event) -> None:
        if event.type == "tool_call_start":
            marks.setdefault("first_start", time.perf_counter())
        if event.type in ("tool_call_result", "tool_call_error"):
            marks["last_end"] = time.perf_counter()

    engine = make_engine()
    engine.subscribe(clock)
    result, events = run(engine)

    assert result.stop_reason == "answer", result.error
    assert [r.data for r in result.tool_results] == [{"slept": 0.2, "label": "a"}, {"slept": 0.2, "label": "b"}]
    assert marks["last_end"] - marks["first_start"] < 0.35  # one nap's time, not two
    naps = sys.modules[SKILLS_MODULE].CALLS[-2:]
    assert max(start for _, start, _ in naps) < min(end for _, _, end in naps)  # they overlapped
    # Both results go back in one turn, each under its own id.
    second = server.bodies[1]
    assert set(wire.tool_results(second)) == {"nap_a", "nap_b"}
    if wire.name == "anthropic":  # one user message holding both tool_result blocks
        assert [b["type"] for b in second["messages"][-1]["content"]] == ["tool_result", "tool_result"]
    else:
        assert [m["role"] for m in second["messages"][-2:]] == ["tool", "tool"]
    assert seq_gap_free(events)
    assert {e.tool_call_id for e in events if e.type == "skill_result"} == {"nap_a", "nap_b"}


def test_one_failing_parallel_call_does_not_affect_the_other(wire: Any, server: FakeServer,
                                                             make_engine: Callable[..., Engine]) -> None:
    server.script(
        wire.reply("", [call("good", "echo", {"name": "x"}), call("bad", "nope", {}), call("worse", "echo", {"name": ""})]),
        wire.reply("ok"),
    )
    result, _ = run(make_engine())
    assert [(r.tool_call_id, r.ok) for r in result.tool_results] == [("good", True), ("bad", False), ("worse", False)]
    observations = wire.tool_results(server.bodies[1])
    assert "unknown_tool" in observations["bad"] and "Available tools:" in observations["bad"]
    assert "/name" in observations["worse"]


def test_malformed_arguments_come_back_as_correctable_errors(wire: Any, server: FakeServer,
                                                             make_engine: Callable[..., Engine]) -> None:
    server.script(
        wire.reply("", [call("c1", "echo", '{"name": "Ada", "count": ')], split_at=5),  # not JSON
        wire.reply("", [call("c2", "echo", {"name": "Ada", "count": "two"})]),  # JSON, wrong type
        wire.reply("", [call("c3", "echo", {"name": "Ada", "count": 2})]),  # corrected
        wire.reply("Fixed it."),
    )
    result, _ = run(make_engine())
    assert result.stop_reason == "answer" and result.answer == "Fixed it."
    assert [r.error.code if r.error else "ok" for r in result.tool_results] == ["invalid_arguments", "invalid_arguments", "ok"]

    not_json = wire.tool_results(server.bodies[1])["c1"]
    assert "not valid JSON" in not_json
    wrong_type = wire.tool_results(server.bodies[2])["c2"]
    assert "/count" in wrong_type  # names the failing field
    for text in (not_json, wrong_type):  # and echoes the expected schema
        schema = json.loads(text.split("Expected arguments schema: ", 1)[1].split("\n", 1)[0])
        assert schema["required"] == ["name"] and schema["properties"]["count"]["type"] == "integer"


def test_corrections_are_bounded_per_tool(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(*(wire.reply("", [call(f"c{i}", "echo", {"name": "", "count": i})]) for i in range(5)))
    result, events = run(make_engine(), limits=AgentLimits(max_corrections=3, total_timeout=5))
    assert result.stop_reason == "error"
    assert "'echo'" in result.error and "max_corrections=3" in result.error
    assert len(server.requests) == 3
    assert first(events, "agent_error").data["message"] == result.error


# ─── failures on the wire ───────────────────────────────────────────────────────────────


def test_rate_limited_then_success(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(wire.status(429, "slow down", {"retry-after-ms": "30"}), wire.reply("made it"))
    started = time.perf_counter()
    result, _ = run(make_engine())
    assert result.stop_reason == "answer" and result.answer == "made it"
    assert len(server.requests) == 2 and server.bodies[0] == server.bodies[1]
    assert time.perf_counter() - started >= 0.03  # the server's retry-after was honoured


def test_rate_limited_until_retries_run_out(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(*[wire.status(429, "still busy", {"retry-after-ms": "5"})] * 3)
    result, _ = run(make_engine(options={"max_retries": 1}))
    assert result.stop_reason == "error"
    assert "429" in result.error and "still busy" in result.error
    assert len(server.requests) == 2


def test_connection_dropped_mid_stream(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(Reply(events=wire.events("This answer never finishes", split_at=3), drop_after=4))
    started = time.perf_counter()
    result, events = run(make_engine(), guard=5)
    assert time.perf_counter() - started < 3
    assert result.stop_reason == "error"
    assert "model 'fake' failed" in result.error
    assert any(word in result.error for word in ("RemoteProtocolError", "incomplete", "broke off", "closed"))
    assert types(events)[-2:] == ["agent_error", "agent_done"]
    assert len(server.requests) == 1  # a broken stream is not silently replayed


def test_stream_that_stalls_hits_the_model_timeout(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(Reply(events=wire.events("slow answer", split_at=2), gap=30))  # one piece, then silence
    started = time.perf_counter()
    result, _ = run(make_engine(timeout="300ms", options={"max_retries": 0}), guard=5)
    assert time.perf_counter() - started < 3
    assert result.stop_reason == "error" and ("0.3s" in result.error or "timed out" in result.error.lower()), result.error


# ─── limits ─────────────────────────────────────────────────────────────────────────────


def test_repeated_call_stops_the_loop(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    same = {"name": "Ada", "count": 2}
    server.script(*(wire.reply("", [call(f"c{i}", "echo", same)]) for i in range(5)))
    result, events = run(make_engine(), limits=AgentLimits(max_repeated_calls=3, total_timeout=5))
    assert result.stop_reason == "repeated_call"
    assert len(server.requests) == 3
    assert len(result.tool_results) == 2  # the third identical call is not run
    assert result.messages[-1].role == "tool"  # no unanswered call left in the transcript
    assert events[-1].data["stop_reason"] == "repeated_call"


def test_token_budget(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(
        wire.reply("", [call("c1", "echo", {"name": "a"})], usage=(100, 50)),
        wire.reply("", [call("c2", "echo", {"name": "b"})], usage=(100, 50)),
        wire.reply("never asked"),
    )
    result, events = run(make_engine(), limits=AgentLimits(token_budget=250, total_timeout=5))
    assert result.stop_reason == "token_budget"
    assert len(server.requests) == 2 and [r.tool_call_id for r in result.tool_results] == ["c1"]
    assert events[-1].data["usage"] == {"input_tokens": 200, "output_tokens": 100}


def test_max_steps(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(*(wire.reply("", [call(f"c{i}", "echo", {"name": f"n{i}"})]) for i in range(4)))
    result, events = run(make_engine(), limits=AgentLimits(max_steps=2, total_timeout=5))
    assert result.stop_reason == "max_steps" and result.steps == 2
    assert len(server.requests) == 2 and len(result.tool_results) == 2  # gathered so far
    assert [e.data["step"] for e in events if e.type == "model_call_start"] == [1, 2]


@pytest.mark.parametrize("choice", ["auto", "none", "required", "echo"])
def test_tool_choice_on_the_wire(wire: Any, server: FakeServer, make_engine: Callable[..., Engine], choice: str) -> None:
    if choice == "none":
        server.script(wire.reply("No tools needed."))
    else:
        server.script(wire.reply("", [call("c1", "echo", {"name": "x"})]), wire.reply("done"))
    result, _ = run(make_engine(), tool_choice=choice, tools=["echo", "nap"])
    assert result.stop_reason == "answer", result.error
    bodies = server.bodies
    assert wire.tool_choice(bodies[0]) == wire.expected_choice(choice)
    assert sorted(wire.tool_names(bodies[0])) == ["echo", "nap"]  # the allowed subset, even with `none`
    if choice != "none":  # a forced choice applies to the first call only, so the model can answer
        assert wire.tool_choice(bodies[1]) == wire.expected_choice("auto")


def test_allowed_tools_are_enforced_not_just_advertised(wire: Any, server: FakeServer,
                                                        make_engine: Callable[..., Engine]) -> None:
    server.script(wire.reply("", [call("c1", "sendEmail", {"to": "x"})]), wire.reply("ok"))
    result, _ = run(make_engine(), tools=["echo"])
    assert result.tool_results[0].error.code == "not_allowed"


@pytest.mark.parametrize("where", ["in a tool", "in the model"])
def test_total_timeout(wire: Any, server: FakeServer, make_engine: Callable[..., Engine], where: str) -> None:
    if where == "in a tool":
        server.script(wire.reply("", [call("c1", "nap", {"seconds": 10})]))
    else:
        server.script(Reply(delay=10, events=wire.events("too late")))
    started = time.perf_counter()
    result, events = run(make_engine(), limits=AgentLimits(total_timeout=1.0), guard=8)
    assert time.perf_counter() - started < 4
    assert result.stop_reason == "timeout"
    assert events[-1].type == "agent_done" and events[-1].data["stop_reason"] == "timeout"
    # On a loaded machine the first model call alone may outlast the limit; when the tool did
    # start, it must end cancelled and still be answered in the transcript.
    if where == "in a tool" and any(e.type == "tool_call_start" for e in events):
        assert first(events, "tool_call_error", tool_call_id="c1").data["error"]["code"] == "cancelled"
        assert result.messages[-1].role == "tool" and result.messages[-1].tool_call_id == "c1"
    assert seq_gap_free(events)


# ─── approval and cancellation ──────────────────────────────────────────────────────────


def test_concurrent_runs_of_one_agent_each_end_with_their_own_result(
        wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    """One Agent object, two runs at once: the first is cancelled mid tool call while the
    second goes on to its answer; each run ends with its own result, never the other's."""
    server.script(wire.reply("", [call("long", "nap", {"seconds": 10})]),
                  wire.reply("", [call("b1", "echo", {"name": "b"})]), wire.reply("B's answer"))
    engine = make_engine()
    agent = engine.agent("fake", limits=QUICK)
    events: dict[str, list[Event]] = {"a": [], "b": []}
    runs: dict[str, Any] = {}

    async def main() -> AgentResult:
        napping, echoing = asyncio.Event(), asyncio.Event()

        def listener(name: str) -> Callable[[Event], None]:
            def listen(event: Event) -> None:
                runs.setdefault(name, engine.runs.get(event.run_id))
                events[name].append(event)
                if event.type == "skill_progress_delta" and event.tool_call_id == "long":
                    napping.set()
                if event.type == "tool_call_start" and event.tool_call_id == "b1":
                    echoing.set()
            return listen

        loop = asyncio.get_running_loop()
        first = loop.create_task(agent.run("go", on_event=listener("a")))
        await asyncio.wait_for(napping.wait(), 5)
        second = loop.create_task(agent.run("go", on_event=listener("b")))
        await asyncio.wait_for(echoing.wait(), 5)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await second

    answered = asyncio.run(asyncio.wait_for(main(), 8))
    assert answered.answer == "B's answer" and answered.stop_reason == "answer"
    a_end, b_end = events["a"][-1], events["b"][-1]
    assert a_end.type == b_end.type == "agent_done"
    assert isinstance(a_end.result, AgentResult) and a_end.result.run_id == a_end.run_id
    assert a_end.result.stop_reason == "cancelled" and a_end.result.answer != "B's answer"
    assert b_end.result is answered
    assert (runs["a"].status, runs["b"].status) == ("cancelled", "ok")
    assert runs["b"].result == "B's answer" and runs["a"].result != "B's answer"


def test_parallel_approvals_resolved_in_reverse_order(wire: Any, server: FakeServer,
                                                      make_engine: Callable[..., Engine]) -> None:
    server.script(
        wire.reply("Both need approval.", [call("call_send", "sendEmail", {"to": "ann@example.com"}),
                                           call("call_delete", "deleteRecord", {"to": "record-7"})]),
        wire.reply("Sent the email; the deletion was declined."),
    )
    log: list[tuple[str, str]] = []
    delete_answered = asyncio.Event()

    async def approve(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
        log.append(("asked", tool_call_id))
        if tool_call_id == "call_send":
            await delete_answered.wait()  # the first call's answer comes last
            await asyncio.sleep(0.01)
            log.append(("answered", tool_call_id))
            return args == {"to": "ann@example.com"}  # grant
        log.append(("answered", tool_call_id))
        delete_answered.set()
        return False  # deny

    result, events = run(make_engine(), approve=approve)

    assert result.stop_reason == "answer"
    assert log == [("asked", "call_send"), ("asked", "call_delete"), ("answered", "call_delete"), ("answered", "call_send")]
    by_id = {r.tool_call_id: r for r in result.tool_results}
    assert by_id["call_send"].ok and by_id["call_send"].data == {"sent": "ann@example.com"}
    assert by_id["call_delete"].error.code == "confirmation_denied"
    asked = {e.tool_call_id: e.data for e in events if e.type == "confirmation_required"}
    assert asked == {"call_send": {"tool": "sendEmail", "arguments": {"to": "ann@example.com"}},
                     "call_delete": {"tool": "deleteRecord", "arguments": {"to": "record-7"}}}
    observations = wire.tool_results(server.bodies[1])
    assert observations["call_send"].startswith("[sendEmail succeeded") and "ann@example.com" in observations["call_send"]
    assert "declined" in observations["call_delete"] and "deleteRecord" in observations["call_delete"]
    assert "sendEmail" not in observations["call_delete"]


def test_no_approver_means_denied(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(wire.reply("", [call("c1", "sendEmail", {"to": "x"})]), wire.reply("ok"))
    result, _ = run(make_engine())
    assert result.tool_results[0].error.code == "confirmation_denied"
    assert "declined" in wire.tool_results(server.bodies[1])["c1"]


def test_cancel_during_a_tool_call(wire: Any, server: FakeServer, make_engine: Callable[..., Engine]) -> None:
    server.script(wire.reply("", [call("long", "nap", {"seconds": 10}), call("short", "echo", {"name": "x"})]))
    agent = make_engine().agent("fake", limits=QUICK)
    events: list[Event] = []

    async def main() -> None:
        napping = asyncio.Event()

        def listen(event: Event) -> None:
            events.append(event)
            if event.type == "skill_progress_delta" and event.tool_call_id == "long":
                napping.set()

        task = asyncio.get_running_loop().create_task(agent.run("go", on_event=listen))
        await asyncio.wait_for(napping.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.perf_counter()
    asyncio.run(asyncio.wait_for(main(), 8))
    assert time.perf_counter() - started < 2
    result = events[-1].result  # the run's own partial result
    assert isinstance(result, AgentResult) and result.stop_reason == "cancelled"
    assert [(r.tool_call_id, r.ok) for r in result.tool_results] == [("short", True)]  # what finished is kept
    assert [(m.role, m.tool_call_id) for m in result.messages[-3:]] == [("assistant", None), ("tool", "long"), ("tool", "short")]
    assert "cancelled" in result.messages[-2].content
    assert first(events, "tool_call_error", tool_call_id="long").data["error"]["code"] == "cancelled"
    assert events[-1].type == "agent_done" and events[-1].data["stop_reason"] == "cancelled"
    assert seq_gap_free(events)
