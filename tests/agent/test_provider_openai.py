"""The `openai` provider (the official SDK) against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from engine.providers.base import ChatMessage, ModelRequest, ProviderError
from engine.providers.openai import OpenAIProvider
from engine.runtime.answers import AnswerSchema
from engine.spec.models import ModelSpec
from fake_llm_servers import FakeServer, OpenAIWire, Reply, call, module_server, server  # noqa: F401 - shared fixtures

WIRE = OpenAIWire()
ECHO = {"name": "echo", "description": "Echo.", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}
HELLO = ModelRequest((ChatMessage("user", "hi"),))
PLAN = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}


def provider(server: FakeServer, **entry: Any) -> OpenAIProvider:
    return OpenAIProvider(ModelSpec(**WIRE.model_entry(server.url, **entry)))


def ask(p: OpenAIProvider, request: ModelRequest = HELLO, on_text: Any = None) -> Any:
    return asyncio.run(asyncio.wait_for(p.request(request, on_text), 10))


def test_streamed_text_usage_and_request(server: FakeServer) -> None:
    server.script(WIRE.reply("Hello there", split_at=3, usage=(12, 4)))
    pieces: list[str] = []
    response = ask(provider(server, max_tokens=64), ModelRequest(HELLO.messages, model="gpt-x", max_tokens=64, temperature=0.2), pieces.append)
    assert response.text == "Hello there" and pieces == ["Hel", "lo ", "the", "re"]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 4)
    body = server.requests[0].body
    assert body == {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                    "stream_options": {"include_usage": True}, "temperature": 0.2, "max_tokens": 64}
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("choice, wire", [
    ("auto", "auto"), ("none", "none"), ("required", "required"),
    ("echo", {"type": "function", "function": {"name": "echo"}}),
])
def test_tool_choice_mapping(server: FakeServer, choice: str, wire: Any) -> None:
    server.script(WIRE.reply("ok"))
    ask(provider(server), ModelRequest(HELLO.messages, tools=(ECHO,), tool_choice=choice))
    body = server.requests[0].body
    assert body["tool_choice"] == wire
    assert body["tools"] == [{"type": "function", "function": ECHO}]


def test_one_provider_serves_several_event_loops(server: FakeServer) -> None:
    """A provider is cached on the Project; each asyncio.run gets a client of its own loop."""
    p = provider(server)
    for text in ("one", "two", "three"):
        server.script(WIRE.reply(text))
        assert ask(p).text == text


def test_stream_without_finish_reason_is_an_error(server: FakeServer) -> None:
    server.script(Reply(events=WIRE.events("cut short", split_at=2)[:3]))  # ends cleanly, but mid-answer
    with pytest.raises(ProviderError, match="ended before the model finished") as caught:
        ask(provider(server))
    assert caught.value.retryable


def test_dropped_connection_is_a_clear_error(server: FakeServer) -> None:
    """docs/agent.md: a connection cut mid-stream says "the stream broke off" (issue 10, §16)."""
    server.script(Reply(events=WIRE.events("cut", split_at=1), drop_after=2))
    with pytest.raises(ProviderError, match="^the stream broke off: RemoteProtocolError") as caught:
        ask(provider(server))
    assert caught.value.retryable


def test_server_errors_retried_then_reported(server: FakeServer) -> None:
    server.script(*[WIRE.status(500, "boom", {"retry-after-ms": "1"})] * 2)
    with pytest.raises(ProviderError, match="HTTP 500: boom") as caught:
        ask(provider(server, options={"max_retries": 1}))
    assert caught.value.retryable and len(server.requests) == 2


def test_auth_error_is_not_retried(server: FakeServer) -> None:
    server.script(WIRE.status(401, "invalid api key"))
    with pytest.raises(ProviderError, match="HTTP 401: invalid api key") as caught:
        ask(provider(server))
    assert not caught.value.retryable and len(server.requests) == 1


def test_structured_output_falls_back_when_refused(server: FakeServer) -> None:
    server.script(
        WIRE.status(400, "response_format json_schema is not supported by this model"),
        WIRE.reply('{"title": "Engineer"}'),
    )
    p = provider(server)
    strict = AnswerSchema.of(PLAN).strict  # the strict form comes with the request (computed once, at link time)
    response = ask(p, ModelRequest(HELLO.messages, output_schema=PLAN, output_strict=strict))
    assert json.loads(response.text) == {"title": "Engineer"}
    first, second = server.bodies
    strict_plan = {**PLAN, "additionalProperties": False}  # it qualifies for strict mode (docs/configuration.md)
    assert first["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": strict_plan, "strict": True}}
    assert second["response_format"] == {"type": "json_object"}
    server.script(WIRE.reply('{"title": "x"}'))  # the provider remembers what the server accepts
    ask(p, ModelRequest(HELLO.messages, output_schema=PLAN, output_strict=strict))
    assert server.bodies[-1]["response_format"] == {"type": "json_object"}


def test_interleaved_parallel_call_deltas(server: FakeServer) -> None:
    calls = [call("a", "echo", {"x": "first" * 5}), call("b", "echo", {"x": "second" * 5})]
    server.script(WIRE.reply("", calls, split_at=1, interleave=True))
    response = ask(provider(server), ModelRequest(HELLO.messages, tools=(ECHO,)))
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("a", "echo", {"x": "first" * 5}), ("b", "echo", {"x": "second" * 5})]
    assert response.finish_reason == "tool_calls"
