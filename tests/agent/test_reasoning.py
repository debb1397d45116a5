"""Reasoning you can watch (issue 31 §2): the `reasoning:` model option, Anthropic extended
thinking (blocks and signatures sent back in the tool loop, redacted_thinking untouched),
OpenAI-compatible `reasoning_content` / `reasoning` deltas, the events `model_reasoning_delta`
and `model_reasoning_done`, `send: false` leaving no reasoning text in any sink, and
`skillyard chat --show-reasoning`. Real SDKs against loopback servers that record requests.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.errors import ConfigError
from engine.link.linker import load_project
from engine.runtime.agent import AgentLimits
from fake_llm_servers import WIRES, FakeServer, Reply, call, write_project

QUICK = AgentLimits(total_timeout=30)  # the first use of an SDK imports it (seconds on a busy machine)
OPENAI, ANTHROPIC = WIRES["openai"], WIRES["anthropic"]
THOUGHT = "Let me think: the user wants Ada greeted, so echo is the tool."


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def server(model_server: FakeServer) -> FakeServer:
    model_server.reset()
    return model_server


def anthropic_thinking_reply(thought: str, calls: list[Any], *, text: str = "", redacted: bool = False) -> Reply:
    """A streamed Anthropic answer that thinks first (in pieces, then its signature), then answers or calls."""
    e = ANTHROPIC._event
    out = [e("message_start", {"message": {"id": "msg_t", "type": "message", "role": "assistant", "model": "fake-claude",
                                           "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
           e("content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})]
    out += [e("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": thought[i:i + 7]}})
            for i in range(0, len(thought), 7)]
    out += [e("content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": "sig-part1"}}),
            e("content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": "+part2"}}),
            e("content_block_stop", {"index": 0})]
    index = 1
    if redacted:
        out += [e("content_block_start", {"index": 1, "content_block": {"type": "redacted_thinking", "data": "ENCRYPTED=="}}),
                e("content_block_stop", {"index": 1})]
        index = 2
    if text:
        out += [e("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}),
                e("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": text}}),
                e("content_block_stop", {"index": index})]
        index += 1
    for offset, (cid, name, args) in enumerate(calls):
        i = index + offset
        out += [e("content_block_start", {"index": i, "content_block": {"type": "tool_use", "id": cid, "name": name, "input": {}}}),
                e("content_block_delta", {"index": i, "delta": {"type": "input_json_delta", "partial_json": args}}),
                e("content_block_stop", {"index": i})]
    out += [e("message_delta", {"delta": {"stop_reason": "tool_use" if calls else "end_turn"}, "usage": {"output_tokens": 5}}),
            e("message_stop", {})]
    return Reply(events=out)


def openai_reasoning_reply(thought: str, text: str, field: str = "reasoning_content") -> Reply:
    chunk = OPENAI._chunk
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({field: thought[i:i + 5]}) for i in range(0, len(thought), 5)]
    out += [chunk({"content": text}), chunk({}, "stop"), chunk(None, usage=(10, 5)), b"data: [DONE]\n\n"]
    return Reply(events=out)


def run(engine: Engine, prompt: str = "greet Ada") -> tuple[Any, list[Any]]:
    events: list[Any] = []
    result = asyncio.run(asyncio.wait_for(engine.agent("fake", limits=QUICK).run(prompt, on_event=events.append), 40))
    return result, events


def test_anthropic_thinking_streams_and_goes_back_with_its_signature(tmp_path: Path, server: FakeServer) -> None:
    entry = ANTHROPIC.model_entry(server.url, max_tokens=4096, reasoning={"enabled": True, "budget_tokens": 1500})
    engine = Engine.from_dir(write_project(tmp_path / "p", {"fake": entry}))
    server.script(anthropic_thinking_reply(THOUGHT, [call("t1", "echo", {"name": "Ada"})], redacted=True),
                  anthropic_thinking_reply("Done thinking.", [], text="Hello Ada."))
    result, events = run(engine)
    assert result.answer == "Hello Ada.", (result.error, [e.type for e in events])
    first, second = server.bodies
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 1500}
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][:2] == [
        {"type": "thinking", "thinking": THOUGHT, "signature": "sig-part1+part2"},
        {"type": "redacted_thinking", "data": "ENCRYPTED=="},
    ]
    assert assistant["content"][2]["type"] == "tool_use"
    deltas = [e for e in events if e.type == "model_reasoning_delta"]
    assert "".join(e.data["text"] for e in deltas if e.data["step"] == 1) == THOUGHT
    done = [e for e in events if e.type == "model_reasoning_done"]
    assert [d.data["chars"] for d in done] == [len(THOUGHT), len("Done thinking.")]
    assert all(d.data["duration_ms"] >= 0 for d in done)
    kinds = [e.type for e in events]
    assert kinds.index("model_reasoning_done") < kinds.index("tool_call_start")
    assert kinds[kinds.index("model_reasoning_done", kinds.index("tool_call_start")) + 1] == "model_text_delta"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_openai_compatible_reasoning_deltas_and_effort(tmp_path: Path, server: FakeServer, field: str) -> None:
    entry = OPENAI.model_entry(server.url, reasoning={"enabled": True, "effort": "high"})
    engine = Engine.from_dir(write_project(tmp_path / "p", {"fake": entry}))
    server.script(openai_reasoning_reply(THOUGHT, "Hi.", field))
    result, events = run(engine)
    assert result.answer == "Hi." and server.bodies[0]["reasoning_effort"] == "high"
    assert "".join(e.data["text"] for e in events if e.type == "model_reasoning_delta") == THOUGHT
    kinds = [e.type for e in events]
    assert kinds.index("model_reasoning_done") < kinds.index("model_text_delta")


def test_a_secret_split_across_reasoning_deltas_is_caught(tmp_path: Path, server: FakeServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-planted-reasoning-7d1e"
    monkeypatch.setenv("PLANTED_REASONING_KEY", secret)
    entry = OPENAI.model_entry(server.url, api_key="${PLANTED_REASONING_KEY}")
    engine = Engine.from_dir(write_project(tmp_path / "p", {"fake": entry}))
    server.script(openai_reasoning_reply(f"the key is {secret}, keep it", "ok"))  # 5-char pieces split it
    _, events = run(engine)
    shown = "".join(e.data["text"] for e in events if e.type == "model_reasoning_delta")
    assert secret not in shown and "[REDACTED]" in shown


def test_send_false_leaves_no_reasoning_text_in_any_sink(tmp_path: Path, server: FakeServer,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    planted = "PLANTED-THOUGHT-3c9b-never-leaves"
    entry = OPENAI.model_entry(server.url, reasoning={"enabled": True, "send": False})
    root = write_project(tmp_path / "p", {"fake": entry})
    server.script(openai_reasoning_reply(planted, "Answer one."), openai_reasoning_reply(planted, "Answer two."))
    assert main(["chat", "--dir", str(root), "--output", "events", "--show-reasoning", "--session", "s", "hi"]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    done = [line for line in lines if line["type"] == "model_reasoning_done"]
    assert done and done[0]["data"]["chars"] == len(planted)
    assert not any(line["type"] == "model_reasoning_delta" for line in lines)

    from engine.server import create_app

    engine = Engine.from_dir(root, store=True)
    app = create_app(engine, api_keys="", mcp=False)

    async def sse() -> str:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as client:
            answer = await client.post("/v1/agent", json={"messages": "again", "session_id": "s"},
                                       headers={"Accept": "text/event-stream"}, timeout=10)
            return answer.text

    stream = asyncio.run(sse())
    engine.close()
    assert "model_reasoning_done" in stream and "Answer two." in stream
    sinks = {"stdout": out, "stderr": err, "sse": stream}
    store = root / ".skillyard"
    for path in store.iterdir():  # the database, its WAL and shared memory
        sinks[path.name] = path.read_bytes().decode("latin-1")
    assert any(name.endswith("-wal") or name.endswith(".db") for name in sinks)
    for name, text in sinks.items():
        assert planted not in text and planted[:12] not in text, name


def test_show_reasoning_prints_it_on_stderr(tmp_path: Path, server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    entry = OPENAI.model_entry(server.url)
    root = write_project(tmp_path / "p", {"fake": entry})
    server.script(openai_reasoning_reply(THOUGHT, "Hi."), openai_reasoning_reply(THOUGHT, "Hi."))
    assert main(["chat", "--dir", str(root), "--quiet", "--no-store", "--show-reasoning", "hi"]) == 0
    out, err = capsys.readouterr()
    assert THOUGHT in err and THOUGHT not in out and out.strip() == "Hi."
    assert main(["chat", "--dir", str(root), "--quiet", "--no-store", "hi"]) == 0
    assert THOUGHT not in capsys.readouterr().err  # only when asked


@pytest.mark.parametrize("reasoning, column, message", [
    ("{effort: extreme}", 25, "effort"),
    ("{budget_tokens: 10}", 32, "greater than or equal to 1024"),
    ('{send: "no"}', 23, "send"),
    ("{enabled: true, think: 1}", 32, "unknown field 'reasoning.think'"),
])
def test_a_bad_reasoning_option_is_a_load_error_at_its_line(write_yaml_project: Any, reasoning: str, column: int,
                                                              message: str) -> None:
    root = write_yaml_project({"config/models.yaml": f"default: m\nmodels:\n  m:\n    provider: mock\n    reasoning: {reasoning}\n"})
    with pytest.raises(ConfigError) as caught:
        load_project(root)
    (issue,) = [i for i in caught.value.issues if str(i.location).startswith("config/models.yaml")]
    assert str(issue.location) == f"config/models.yaml:5:{column}" and message in issue.message, str(issue)


def test_a_span_shows_how_long_the_model_thought_never_what(tmp_path: Path, server: FakeServer) -> None:
    """OpenTelemetry: `model_reasoning_done` is a span event on its model request, with the duration
    and the length; the text reaches no span, even with `send: true` (issue 31 §2)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    entry = OPENAI.model_entry(server.url, reasoning={"enabled": True})
    engine = Engine.from_dir(write_project(tmp_path / "p", {"fake": entry}), tracer_provider=provider)
    server.script(openai_reasoning_reply(THOUGHT, "Hi."))
    result, _ = run(engine)
    engine.close()
    assert result.answer == "Hi."
    spans = exporter.get_finished_spans()
    chat = [span for span in spans if span.name.startswith("chat ")]
    assert len(chat) == 1, [span.name for span in spans]
    [thought] = [event for event in chat[0].events if event.name == "gen_ai.reasoning"]
    assert thought.attributes["skillyard.reasoning.chars"] == len(THOUGHT)
    assert thought.attributes["skillyard.reasoning.duration_ms"] >= 0
    everything = repr([(span.name, span.attributes, [(e.name, e.attributes) for e in span.events]) for span in spans])
    assert THOUGHT[:20] not in everything
