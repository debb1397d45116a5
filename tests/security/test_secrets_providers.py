"""Issue 10: the provider side of secrets item 4, the two provider defects of §16, and the
model side of the surrogate rule of §5 — against real loopback servers (fake_llm_servers).

- A provider error that echoes the API key never carries it into the run's error (the
  AgentResult, `agent_error`, the store).
- Failed tool results reach Anthropic with `is_error: true`.
- On the OpenAI path, a refused connection says "the connection to the endpoint failed"
  (a cut mid-stream says "the stream broke off": tests/agent/test_provider_openai.py).
- Lone surrogates in model text and tool-call arguments become U+FFFD, with a log note.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine import Engine
from engine.logging import configure_logging
from engine.providers.base import ChatMessage, ModelRequest, ProviderError
from engine.providers.registry import provider_factory
from engine.runtime.agent import AgentLimits
from engine.spec.models import ModelSpec
from fake_llm_servers import WIRES, FakeServer, Reply, call, write_project
from secrets_support import leaks, plant, sink_files

QUICK = AgentLimits(total_timeout=10)


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


def agent_run(root: Path, *, store: bool = False) -> tuple[Any, list[Any], Engine]:
    engine = Engine.from_dir(root, store=store)
    events: list[Any] = []
    result = asyncio.run(asyncio.wait_for(engine.agent("fake", limits=QUICK).run("go", on_event=events.append), 20))
    engine.close()
    return result, events, engine


def test_a_provider_error_that_echoes_the_key_is_scrubbed(tmp_path: Path, server: FakeServer, wire: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    key = plant("provider-key")
    monkeypatch.setenv("SECRETS_TEST_PROVIDER_KEY", key)
    server.script(wire.status(401, f"Incorrect API key provided: {key}. You can find your key at …"))
    root = write_project(tmp_path / "project", {"fake": wire.model_entry(server.url, api_key="${SECRETS_TEST_PROVIDER_KEY}")})
    result, events, _ = agent_run(root, store=True)
    assert result.stop_reason == "error" and "Incorrect API key provided: [REDACTED]" in (result.error or "")
    assert server.requests and server.requests[0].headers.get("authorization", server.requests[0].headers.get("x-api-key", "")).endswith(key)
    records = [json.dumps(e.to_dict()) for e in events]
    assert leaks(key, [result.error or "", json.dumps(result.to_dict()), *records], sink_files(root)) == []


def test_failed_tool_results_reach_anthropic_with_is_error(tmp_path: Path, servers: dict[str, FakeServer]) -> None:
    server = servers["anthropic"]
    server.reset()
    wire = WIRES["anthropic"]
    server.script(
        wire.reply("", [call("ok_1", "echo", {"name": "Ada"}), call("bad_1", "echo", {"name": ""}), call("gone_1", "nope", {})]),
        wire.reply("Done."),
    )
    root = write_project(tmp_path / "project", {"fake": wire.model_entry(server.url)})
    result, _, _ = agent_run(root)
    assert result.stop_reason == "answer"
    second = server.requests[1].body
    blocks = {b["tool_use_id"]: b for m in second["messages"] if isinstance(m["content"], list)
              for b in m["content"] if b.get("type") == "tool_result"}
    assert "is_error" not in blocks["ok_1"]
    assert blocks["bad_1"]["is_error"] is True and blocks["gone_1"]["is_error"] is True


def test_is_error_round_trips_through_the_anthropic_adapters() -> None:
    from engine.providers.anthropic import from_anthropic_messages, to_anthropic_messages

    messages = (ChatMessage("user", "go"), ChatMessage("assistant", "", tool_calls=()),
                ChatMessage("tool", "[x failed: timeout]", tool_call_id="t1", name="x", is_error=True))
    _, wire_messages = to_anthropic_messages(messages)
    assert wire_messages[-1]["content"][0]["is_error"] is True
    assert from_anthropic_messages(None, wire_messages)[-1].is_error is True


def test_openai_refused_connection_is_not_a_stream_that_broke_off(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    factory = provider_factory("openai")
    assert factory is not None
    spec = ModelSpec(provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-x", options={"max_retries": 0})
    with pytest.raises(ProviderError, match="^the connection to the endpoint failed"):
        asyncio.run(factory(spec, tmp_path).request(ModelRequest((ChatMessage("user", "hi"),))))


def _surrogate_reply(wire: Any) -> Reply:
    """Text and tool-call arguments holding a lone surrogate (valid JSON escapes on the wire)."""
    reply = wire.reply("hello WORLD", [call("c1", "echo", {"name": "SURR"})])
    events = [piece.replace(b"WORLD", b"\\ud800").replace(b"SURR", b"\\ud800x") for piece in reply.events or []]
    return Reply(events=events)


def test_lone_surrogates_from_a_model_become_replacement_characters(
    tmp_path: Path, server: FakeServer, wire: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server.script(_surrogate_reply(wire), wire.reply("Done."))
    root = write_project(tmp_path / "project", {"fake": wire.model_entry(server.url)})
    configure_logging("json", "info")
    try:
        result, events, _ = agent_run(root, store=True)
    finally:
        configure_logging()
    assert result.stop_reason == "answer", result.error
    deltas = "".join(e.data["text"] for e in events if e.type == "model_text_delta" and e.data["step"] == 1)
    assert deltas == "hello \ufffd"
    assert result.messages[1].content == "hello \ufffd"  # the assistant turn kept in the transcript
    assert result.tool_results[0].ok and result.tool_results[0].data == {"name": "\ufffdx", "count": 1}
    for event in events:
        json.dumps(event.to_dict()).encode("utf-8")  # every event can be written to a UTF-8 sink
    assert "replaced with U+FFFD" in capsys.readouterr().err
