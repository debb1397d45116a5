"""The `anthropic` provider against a real Messages API server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from engine import Engine
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import ChatMessage, ModelRequest, ProviderError
from engine.providers.registry import known_providers, provider_factory
from engine.spec.models import ModelSpec
from fake_llm_servers import AnthropicWire, FakeServer, Reply, call, module_server, server  # noqa: F401 - shared fixtures

WIRE = AnthropicWire()
ECHO = {"name": "echo", "description": "Echo.", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}
HELLO = ModelRequest((ChatMessage("system", "Be kind."), ChatMessage("user", "hi")))


def provider(server: FakeServer, **entry: Any) -> AnthropicProvider:
    return AnthropicProvider(ModelSpec(**WIRE.model_entry(server.url, **entry)))


def ask(p: AnthropicProvider, request: ModelRequest = HELLO, on_text: Any = None) -> Any:
    return asyncio.run(asyncio.wait_for(p.request(request, on_text), 10))


def test_registered_as_a_builtin_provider(tmp_path: Path) -> None:
    assert "anthropic" in known_providers()
    factory = provider_factory("anthropic")
    assert factory is not None
    assert isinstance(factory(ModelSpec(provider="anthropic", model="claude-x"), tmp_path), AnthropicProvider)
    with pytest.raises(ProviderError, match="needs `model:`"):
        AnthropicProvider(ModelSpec(provider="anthropic"))
    with pytest.raises(ProviderError, match="structured_output"):
        AnthropicProvider(ModelSpec(provider="anthropic", model="m", options={"structured_output": "magic"}))


def test_request_body_and_headers(server: FakeServer) -> None:
    server.script(WIRE.reply("Hello!", split_at=2))
    pieces: list[str] = []
    response = ask(provider(server, temperature=0.3, options={"headers": {"anthropic-beta": "tools-2024"}}),
                   ModelRequest(HELLO.messages, model="claude-test", temperature=0.3), pieces.append)
    assert response.text == "Hello!" and pieces == ["He", "ll", "o!"] and response.finish_reason == "stop"
    recorded = server.requests[0]
    assert recorded.path == "/v1/messages"
    assert recorded.headers["x-api-key"] == "sk-ant-test"
    assert recorded.headers["anthropic-version"] == "2023-06-01"
    assert recorded.headers["anthropic-beta"] == "tools-2024"
    assert recorded.body == {"model": "claude-test", "max_tokens": 1024, "stream": True, "temperature": 0.3,
                             "system": "Be kind.", "messages": [{"role": "user", "content": "hi"}]}


def test_defaults_base_url_with_v1_and_no_key(server: FakeServer) -> None:
    server.script(WIRE.reply("ok"))
    spec = ModelSpec(provider="anthropic", model="claude-x", base_url=server.url + "/v1/")
    ask(AnthropicProvider(spec))
    recorded = server.requests[0]
    assert recorded.path == "/v1/messages" and "x-api-key" not in recorded.headers
    assert recorded.body["max_tokens"] == 4096  # required by the API; a default is sent
    assert AnthropicProvider(ModelSpec(provider="anthropic", model="m")).url == "https://api.anthropic.com/v1/messages"


@pytest.mark.parametrize("choice, wire", [
    ("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"}),
    ("echo", {"type": "tool", "name": "echo"}),
])
def test_tool_choice_mapping(server: FakeServer, choice: str, wire: dict[str, Any]) -> None:
    server.script(WIRE.reply("ok"))
    ask(provider(server), ModelRequest(HELLO.messages, tools=(ECHO,), tool_choice=choice))
    body = server.requests[0].body
    assert body["tool_choice"] == wire
    assert body["tools"] == [{"name": "echo", "description": "Echo.", "input_schema": ECHO["parameters"]}]


@pytest.mark.parametrize("stop, finish", [("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop"),
                                          ("tool_use", "tool_calls"), ("refusal", "refusal")])
def test_stop_reasons(server: FakeServer, stop: str, finish: str) -> None:
    calls = [call("toolu_1", "echo", {"x": "y"})] if stop == "tool_use" else []
    server.script(WIRE.reply("text", calls, stop_reason=stop))
    assert ask(provider(server)).finish_reason == finish


def test_usage_counts_cached_input(server: FakeServer) -> None:
    events = WIRE.events("hi", usage=(5, 7))
    start = json.loads(events[0].split(b"data: ", 1)[1])
    start["message"]["usage"].update(cache_read_input_tokens=100, cache_creation_input_tokens=20)
    events[0] = b"event: message_start\ndata: " + json.dumps(start).encode() + b"\n\n"
    delta = json.loads(events[-2].split(b"data: ", 1)[1])
    delta["usage"].update(input_tokens=None, cache_read_input_tokens=None)  # null: unchanged
    events[-2] = b"event: message_delta\ndata: " + json.dumps(delta).encode() + b"\n\n"
    server.script(Reply(events=events))
    usage = ask(provider(server)).usage
    assert (usage.input_tokens, usage.output_tokens) == (125, 7)


def test_bad_base_url_scheme_is_not_retried() -> None:
    p = AnthropicProvider(ModelSpec(provider="anthropic", model="m", base_url="ftp://example.com"))
    with pytest.raises(ProviderError, match="must start with http") as caught:
        ask(p)
    assert not caught.value.retryable


def test_tool_use_without_input_deltas_uses_the_start_input(server: FakeServer) -> None:
    e = WIRE._event
    server.script(Reply(events=[
        e("message_start", {"message": {"usage": {"input_tokens": 1, "output_tokens": 0}}}),
        e("content_block_start", {"index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "echo", "input": {"x": "1"}}}),
        e("content_block_stop", {"index": 0}),
        e("content_block_start", {"index": 1, "content_block": {"type": "tool_use", "id": "t2", "name": "echo", "input": {}}}),
        e("content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        e("content_block_stop", {"index": 1}),
        e("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
        e("message_stop", {}),
    ]))
    response = ask(provider(server))
    assert [(c.id, json.loads(c.arguments)) for c in response.tool_calls] == [("t1", {"x": "1"}), ("t2", {})]


# ─── errors and retries ─────────────────────────────────────────────────────────────────


def test_overloaded_529_then_success_honours_retry_after(server: FakeServer) -> None:
    server.script(WIRE.status(529, "Overloaded", {"retry-after": "0.2"}), WIRE.reply("ok"))
    started = time.perf_counter()
    assert ask(provider(server)).text == "ok"
    assert time.perf_counter() - started >= 0.2 and len(server.requests) == 2


def test_retries_run_out(server: FakeServer) -> None:
    server.script(*[WIRE.status(503, "unavailable", {"retry-after-ms": "1"})] * 3)
    with pytest.raises(ProviderError) as caught:
        ask(provider(server, options={"max_retries": 2}))
    assert len(server.requests) == 3
    assert caught.value.retryable and "HTTP 503" in str(caught.value) and "unavailable" in str(caught.value)


@pytest.mark.parametrize("status, text", [(400, "invalid_request_error: bad field"), (401, "authentication failed"),
                                          (404, "check model and base_url")])
def test_client_errors_are_not_retried(server: FakeServer, status: int, text: str) -> None:
    server.script(WIRE.status(status, "bad field"))
    with pytest.raises(ProviderError, match=text) as caught:
        ask(provider(server))
    assert not caught.value.retryable and len(server.requests) == 1


def test_x_should_retry_overrides(server: FakeServer) -> None:
    server.script(WIRE.status(500, "do not retry me", {"x-should-retry": "false"}))
    with pytest.raises(ProviderError):
        ask(provider(server))
    assert len(server.requests) == 1


def test_error_event_in_the_stream(server: FakeServer) -> None:
    events = WIRE.events("partial", split_at=2)[:4]
    events.append(b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n')
    server.script(Reply(events=events))
    with pytest.raises(ProviderError, match="overloaded_error: Overloaded") as caught:
        ask(provider(server))
    assert caught.value.retryable and len(server.requests) == 1


@pytest.mark.parametrize("reply, message", [
    (Reply(events=WIRE.events("cut", split_at=1)[:-1]), "ended before message_stop"),
    (Reply(events=WIRE.events("cut", split_at=1), drop_after=3), "broke off"),
    (Reply(events=[b"event: message_start\ndata: {not json\n\n"]), "not JSON"),
    (Reply(body=b'{"id": "msg"}'), "expected an event stream"),
])
def test_broken_streams(server: FakeServer, reply: Reply, message: str) -> None:
    server.script(reply)
    with pytest.raises(ProviderError, match=message):
        ask(provider(server))


def test_unreachable_endpoint() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    p = AnthropicProvider(ModelSpec(provider="anthropic", model="m", base_url=f"http://127.0.0.1:{port}", options={"max_retries": 0}))
    with pytest.raises(ProviderError, match="cannot reach") as caught:
        ask(p)
    assert caught.value.retryable


def test_server_that_never_answers_times_out(server: FakeServer) -> None:
    server.script(Reply(delay=30, events=[]))
    started = time.perf_counter()
    with pytest.raises(ProviderError, match="did not answer within 0.2s"):
        ask(provider(server, timeout="200ms", options={"max_retries": 0}))
    assert time.perf_counter() - started < 2


# ─── structured output ──────────────────────────────────────────────────────────────────

PLAN = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}


def test_output_schema_uses_a_forced_tool(server: FakeServer) -> None:
    server.script(WIRE.reply("", [call("toolu_1", "json_output", {"title": "Engineer"})], split_at=4))
    pieces: list[str] = []
    response = ask(provider(server), ModelRequest(HELLO.messages, output_schema=PLAN), pieces.append)
    assert json.loads(response.text) == {"title": "Engineer"}
    assert response.tool_calls == () and response.finish_reason == "stop"
    assert "".join(pieces) == response.text  # the JSON streams as progress
    body = server.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "json_output"}
    assert body["tools"][0]["input_schema"] == PLAN


def test_non_object_output_schema_is_wrapped(server: FakeServer) -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    server.script(WIRE.reply("", [call("toolu_1", "json_output", {"value": ["a", "b"]})]))
    response = ask(provider(server), ModelRequest(HELLO.messages, output_schema=schema))
    assert json.loads(response.text) == ["a", "b"]
    assert server.requests[0].body["tools"][0]["input_schema"]["properties"]["value"] == schema


def test_output_schema_by_prompt_only(server: FakeServer) -> None:
    server.script(WIRE.reply('{"title": "Engineer"}'))
    response = ask(provider(server, options={"structured_output": "prompt"}), ModelRequest(HELLO.messages, output_schema=PLAN))
    assert json.loads(response.text) == {"title": "Engineer"}
    assert "tools" not in server.requests[0].body


def test_prompt_skill_with_output_schema_end_to_end(server: FakeServer, tmp_path: Path) -> None:
    """tool → workflow → prompt skill on an anthropic model: the answer arrives through the forced tool."""
    (tmp_path / "tools.yaml").write_text(
        "tools:\n  title:\n    description: Find the job title.\n"
        "    parameters: {type: object, properties: {jd: {type: string}}, required: [jd]}\n    workflow: title\n")
    (tmp_path / "workflows.yaml").write_text("workflows:\n  title:\n    steps:\n      - {id: t, skill: title, input: {jd: $toolArgs.jd}}\n")
    (tmp_path / "skills.yaml").write_text(
        "skills:\n  title:\n    kind: prompt\n    model: claude\n    user: 'Title of: {{ jd }}'\n"
        "    input: {type: object, properties: {jd: {type: string}}}\n"
        "    output: {type: object, properties: {title: {type: string}}, required: [title]}\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "models.yaml").write_text(json.dumps({"models": {"claude": WIRE.model_entry(server.url)}}))
    server.script(WIRE.reply("", [call("toolu_1", "json_output", {"title": "Data Engineer"})], split_at=3))
    result = Engine.from_dir(tmp_path).call_tool_sync("title", {"jd": "We need a data engineer."})
    assert result.ok, result.error
    assert result.data == {"title": "Data Engineer"}
    body = server.requests[0].body
    assert body["messages"] == [{"role": "user", "content": "Title of: We need a data engineer."}]
    assert "JSON Schema" in body["system"]  # the skill's own instruction is kept too


def test_requests_go_through_the_official_sdk_which_retries(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31 §3: the SDK sends the request (its retry counter on each attempt), the key as x-api-key
    only, and no credential of the environment's when the model has none."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
    server.script(WIRE.status(529, "Overloaded", {"retry-after-ms": "1"}), WIRE.reply("ok"))
    assert ask(provider(server)).text == "ok"
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "1"]
    assert all(r.headers["x-api-key"] == "sk-ant-test" and "authorization" not in r.headers for r in server.requests)
    server.reset()
    server.script(WIRE.reply("ok"))
    ask(AnthropicProvider(ModelSpec(provider="anthropic", model="m", base_url=server.url)))
    headers = server.requests[0].headers
    assert "x-api-key" not in headers and "authorization" not in headers
