"""Model fallback (issue 33 §4): `fallback: [backup]` on a model in config/models.yaml, on the wire.

Two loopback chat-completions servers, driven by the real `openai` SDK: the first model's
server fails (a 5xx, a 429, an overloaded 529, a refused connection), the same request goes
to the second, one `model_fallback` event records it, and usage and cost are the second
model's. Never after part of the answer was streamed; never for an error another model would
get too; unknown names and cycles are load errors at their line.
"""

from __future__ import annotations

import asyncio
import json
import socket
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine import Engine
from engine.errors import ConfigError
from engine.providers.fallback import fallback_chain
from engine.runtime.events import Event
from engine.spec.models import ModelSpec
from fake_llm_servers import WIRES, FakeServer

WIRE = WIRES["openai"]
MODULE = "model_fallback_skills"
PRIMARY_PRICES = {"input": 1.0, "output": 1.0}
BACKUP_PRICES = {"input": 10.0, "output": 20.0}


@pytest.fixture(scope="module")
def module_servers() -> Iterator[tuple[FakeServer, FakeServer]]:
    with FakeServer() as first, FakeServer() as second:
        yield first, second


@pytest.fixture
def servers(module_servers: tuple[FakeServer, FakeServer]) -> tuple[FakeServer, FakeServer]:
    for server in module_servers:
        server.reset()
    return module_servers


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again: a connection there is refused


def write(root: Path, models: dict[str, Any], models_text: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.yaml").write_text(textwrap.dedent("""\
        tools:
          extract:
            description: A person from a text.
            parameters: {type: object, properties: {text: {type: string}}, required: [text]}
            workflow: extract
        """))
    (root / "skills.yaml").write_text(textwrap.dedent("""\
        skills:
          person:
            kind: prompt
            user: "Who is in {{ text }}?"
            input: {type: object, properties: {text: {type: string}}, required: [text]}
            output: {type: object, properties: {name: {type: string}}, required: [name]}
        """))
    (root / "workflows.yaml").write_text(
        "workflows:\n  extract: {steps: [{id: person, skill: person, input: {text: $toolArgs.text}}]}\n")
    (root / "config").mkdir(exist_ok=True)
    text = models_text or json.dumps({"default": "primary", "models": models}, indent=2)
    (root / "config" / "models.yaml").write_text(text)
    return root


def two_models(primary_url: str, backup_url: str) -> dict[str, Any]:
    return {
        "primary": WIRE.model_entry(primary_url, model="gpt-primary", prices=PRIMARY_PRICES, fallback=["backup"],
                                    options={"max_retries": 0}),
        "backup": WIRE.model_entry(backup_url, model="gpt-backup", prices=BACKUP_PRICES),
    }


def run_agent(engine: Engine) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    result = asyncio.run(asyncio.wait_for(engine.agent("primary", tools=[]).run("hi", on_event=events.append), 15))
    return result, events


@pytest.mark.parametrize("status", [500, 429, 529])
def test_a_failing_first_model_falls_back_to_the_second(tmp_path: Path, servers: tuple[FakeServer, FakeServer], status: int) -> None:
    first, second = servers
    first.script(WIRE.status(status, "try later"))
    second.script(WIRE.reply("Hello from the backup.", usage=(10, 5)))
    engine = Engine.from_dir(write(tmp_path / "p", two_models(first.url, second.url)))
    try:
        result, events = run_agent(engine)
    finally:
        engine.close()
    assert result.stop_reason == "answer", result.error
    assert result.answer == "Hello from the backup."
    fallbacks = [e for e in events if e.type == "model_fallback"]
    assert len(fallbacks) == 1
    assert fallbacks[0].data["from"] == "primary" and fallbacks[0].data["to"] == "backup"
    assert f"HTTP {status}" in fallbacks[0].data["reason"] and "try later" in fallbacks[0].data["reason"]
    assert fallbacks[0].run_id == result.run_id
    # the same request, with the backup's model id
    assert [b["model"] for b in first.bodies + second.bodies] == ["gpt-primary", "gpt-backup"]
    assert first.bodies[0]["messages"] == second.bodies[0]["messages"]
    # usage and cost are the backup's: 10 * 10 + 5 * 20 per million (the primary's prices: 15 per million)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (10, 5)
    assert result.usage.cost_usd == pytest.approx(200 / 1_000_000)
    done = events[-1]
    assert done.type == "agent_done" and done.data["usage"]["cost_usd"] == pytest.approx(0.0002)


def test_a_refused_connection_falls_back_for_a_prompt_skill(tmp_path: Path, servers: tuple[FakeServer, FakeServer]) -> None:
    _, second = servers
    second.script(WIRE.reply('{"name": "Ada"}', usage=(100, 10)))
    engine = Engine.from_dir(write(tmp_path / "p", two_models(f"http://127.0.0.1:{closed_port()}", second.url)))
    events: list[Event] = []
    try:
        result = asyncio.run(engine.call_tool("extract", {"text": "Ada spoke."}, on_event=events.append))
    finally:
        engine.close()
    assert result.ok, result.error
    assert result.data == {"name": "Ada"}
    fallbacks = [e for e in events if e.type == "model_fallback"]
    assert [(e.data["from"], e.data["to"]) for e in fallbacks] == [("primary", "backup")]
    assert "connection" in fallbacks[0].data["reason"]
    assert second.bodies[0]["model"] == "gpt-backup"
    exchange = next(e for e in events if e.type == "model_exchange")
    assert exchange.data["usage"] == {"input_tokens": 100, "output_tokens": 10, "cost_usd": pytest.approx(0.0012)}
    assert result.metadata["usage"]["cost_usd"] == pytest.approx(0.0012)  # 100 * 10 + 10 * 20 per million


def test_no_fallback_after_part_of_the_answer_was_streamed(tmp_path: Path, servers: tuple[FakeServer, FakeServer]) -> None:
    first, second = servers
    broken = WIRE.reply("Hello, this answer breaks off", split_at=5)
    broken.drop_after = 4  # the role chunk and three pieces of text, then the connection drops
    first.script(broken)
    engine = Engine.from_dir(write(tmp_path / "p", two_models(first.url, second.url)))
    try:
        result, events = run_agent(engine)
    finally:
        engine.close()
    assert result.stop_reason == "error"
    assert "broke off" in (result.error or "")
    streamed = "".join(e.data["text"] for e in events if e.type == "model_text_delta")
    assert streamed == "Hello, this ans"
    assert not [e for e in events if e.type == "model_fallback"]
    assert second.requests == []


def test_an_error_the_next_model_would_get_too_does_not_fall_back(tmp_path: Path, servers: tuple[FakeServer, FakeServer]) -> None:
    first, second = servers
    first.script(WIRE.status(401, "invalid api key"))
    engine = Engine.from_dir(write(tmp_path / "p", two_models(first.url, second.url)))
    try:
        result, events = run_agent(engine)
    finally:
        engine.close()
    assert result.stop_reason == "error" and "HTTP 401" in (result.error or "")
    assert not [e for e in events if e.type == "model_fallback"] and second.requests == []


def test_when_every_model_fails_the_last_error_stands_naming_the_models_tried(
        tmp_path: Path, servers: tuple[FakeServer, FakeServer]) -> None:
    first, second = servers
    first.script(WIRE.status(503, "down"))
    second.script(WIRE.status(500, "also down"))
    models = two_models(first.url, second.url)
    models["backup"]["options"] = {"max_retries": 0}
    engine = Engine.from_dir(write(tmp_path / "p", models))
    try:
        result, events = run_agent(engine)
    finally:
        engine.close()
    assert result.stop_reason == "error"
    assert "HTTP 500: also down (models tried: primary, backup)" in (result.error or "")
    assert len([e for e in events if e.type == "model_fallback"]) == 1


def test_unknown_fallback_names_and_cycles_are_load_errors_at_their_line(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        default: a
        models:
          a:
            provider: mock
            fallback: [b, bee]
          b:
            provider: mock
            fallback:
              - c
          c:
            provider: mock
            fallback: [a]
        """)
    with pytest.raises(ConfigError) as caught:
        Engine.from_dir(write(tmp_path / "p", {}, text))
    message = str(caught.value)
    assert "config/models.yaml:5:" in message and "model 'a' falls back to unknown model 'bee'" in message
    assert "known: a, b, c, mock" in message
    assert "config/models.yaml:9:" in message and "model 'b' falls back to 'c', whose fallbacks lead back to 'b' (a cycle)" in message
    assert "config/models.yaml:12:" in message and "model 'c' falls back to 'a'" in message


def test_the_chain_follows_each_fallback_s_own_list_depth_first_each_model_once() -> None:
    models = {
        "a": ModelSpec(provider="mock", fallback=["b", "c"]),
        "b": ModelSpec(provider="mock", fallback=["d", "c"]),
        "c": ModelSpec(provider="mock"),
        "d": ModelSpec(provider="mock"),
    }
    assert fallback_chain("a", models) == ["a", "b", "d", "c"]
    assert fallback_chain("c", models) == ["c"]


def test_the_failed_model_s_key_echoed_in_its_error_reaches_no_event(tmp_path: Path, servers: tuple[FakeServer, FakeServer]) -> None:
    first, second = servers
    planted = "sk-planted-fallback-7f3a9c"
    first.script(WIRE.status(502, f"upstream rejected key {planted}"))
    second.script(WIRE.reply("fine"))
    models = two_models(first.url, second.url)
    models["primary"]["api_key"] = planted
    engine = Engine.from_dir(write(tmp_path / "p", models))
    try:
        result, events = run_agent(engine)
    finally:
        engine.close()
    assert result.stop_reason == "answer", result.error
    fallback = next(e for e in events if e.type == "model_fallback")
    assert "upstream rejected key [REDACTED]" in fallback.data["reason"]
    assert planted not in json.dumps([e.to_dict() for e in events])
