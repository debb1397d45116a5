"""Adapters between the engine's messages and both wire formats, in both directions.

Row by row, the OpenAI-vs-Anthropic table of seed 003: tool definitions, the model's calls,
the stop reason, results going back, parallel calls, forced calls.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from engine.providers.anthropic import (
    AnthropicProvider,
    from_anthropic_messages,
    to_anthropic_messages,
    to_anthropic_tool_choice,
    to_anthropic_tools,
)
from engine.providers.base import ChatMessage, ModelRequest, ToolCall
from engine.providers.openai import (
    OpenAIProvider,
    from_openai_message,
    from_openai_messages,
    to_openai_messages,
    to_openai_tool_choice,
    to_openai_tools,
)
from engine.spec.models import ModelSpec
from fake_llm_servers import WIRES, FakeServer, call

WEATHER = {
    "name": "get_weather",
    "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def args(value: dict[str, Any]) -> str:
    return json.dumps(value)  # the canonical form both adapters produce


# A conversation with everything: system, text, a text+tools turn with two parallel calls,
# their results, a user follow-up, a single call, its result, the answer.
CONVERSATION = [
    ChatMessage("system", "You are terse."),
    ChatMessage("user", "Weather in Paris and Oslo?"),
    ChatMessage("assistant", "Checking both.", tool_calls=(
        ToolCall("call_1", "get_weather", args({"city": "Paris"})),
        ToolCall("call_2", "get_weather", args({"city": "Oslo"})),
    )),
    ChatMessage("tool", "Paris: 18°C", tool_call_id="call_1", name="get_weather"),
    ChatMessage("tool", "Oslo: 4°C", tool_call_id="call_2", name="get_weather"),
    ChatMessage("user", "And Rome?"),
    ChatMessage("assistant", "", tool_calls=(ToolCall("call_3", "get_weather", args({"city": "Rome"})),)),
    ChatMessage("tool", "Rome: 22°C", tool_call_id="call_3", name="get_weather"),
    ChatMessage("assistant", "Paris 18°C, Oslo 4°C, Rome 22°C."),
]

OPENAI_WIRE = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris and Oslo?"},
    {"role": "assistant", "content": "Checking both.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": args({"city": "Paris"})}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": args({"city": "Oslo"})}},
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Paris: 18°C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "Oslo: 4°C"},
    {"role": "user", "content": "And Rome?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_3", "type": "function", "function": {"name": "get_weather", "arguments": args({"city": "Rome"})}},
    ]},
    {"role": "tool", "tool_call_id": "call_3", "content": "Rome: 22°C"},
    {"role": "assistant", "content": "Paris 18°C, Oslo 4°C, Rome 22°C."},
]

ANTHROPIC_SYSTEM = "You are terse."
ANTHROPIC_WIRE = [
    {"role": "user", "content": "Weather in Paris and Oslo?"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Oslo"}},
    ]},
    {"role": "user", "content": [  # both results, then the follow-up, in one user message
        {"type": "tool_result", "tool_use_id": "call_1", "content": "Paris: 18°C"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "Oslo: 4°C"},
        {"type": "text", "text": "And Rome?"},
    ]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "call_3", "name": "get_weather", "input": {"city": "Rome"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_3", "content": "Rome: 22°C"}]},
    {"role": "assistant", "content": "Paris 18°C, Oslo 4°C, Rome 22°C."},
]


# ─── OpenAI ─────────────────────────────────────────────────────────────────────────────


def test_engine_to_openai() -> None:
    assert to_openai_messages(tuple(CONVERSATION)) == OPENAI_WIRE


def test_openai_to_engine() -> None:
    assert from_openai_messages(OPENAI_WIRE) == CONVERSATION  # tool results get their tool's name back


def test_openai_round_trips() -> None:
    assert from_openai_messages(to_openai_messages(tuple(CONVERSATION))) == CONVERSATION
    assert to_openai_messages(tuple(from_openai_messages(OPENAI_WIRE))) == OPENAI_WIRE


def test_openai_single_message_and_content_parts() -> None:
    assert from_openai_message({"role": "tool", "tool_call_id": "c", "content": "x"}) == ChatMessage("tool", "x", tool_call_id="c")
    parts = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "b"}]}
    assert from_openai_message(parts) == ChatMessage("user", "ab")


# ─── Anthropic ──────────────────────────────────────────────────────────────────────────


def test_engine_to_anthropic() -> None:
    assert to_anthropic_messages(tuple(CONVERSATION)) == (ANTHROPIC_SYSTEM, ANTHROPIC_WIRE)


def test_anthropic_to_engine() -> None:
    assert from_anthropic_messages(ANTHROPIC_SYSTEM, ANTHROPIC_WIRE) == CONVERSATION


def test_anthropic_round_trips() -> None:
    assert from_anthropic_messages(*to_anthropic_messages(tuple(CONVERSATION))) == CONVERSATION
    assert to_anthropic_messages(tuple(from_anthropic_messages(ANTHROPIC_SYSTEM, ANTHROPIC_WIRE))) == (ANTHROPIC_SYSTEM, ANTHROPIC_WIRE)


def test_anthropic_consecutive_tool_results_share_one_user_message() -> None:
    messages = [ChatMessage("user", "go")] + [
        ChatMessage("tool", f"r{i}", tool_call_id=f"c{i}") for i in range(3)
    ]
    _, wire = to_anthropic_messages(tuple(messages))
    assert len(wire) == 2
    assert [b["tool_use_id"] for b in wire[1]["content"]] == ["c0", "c1", "c2"]


def test_anthropic_edge_cases() -> None:
    system, wire = to_anthropic_messages((
        ChatMessage("system", "one"), ChatMessage("system", "two"), ChatMessage("user", "hi"),
        ChatMessage("assistant", ""),  # empty: the API refuses it, so it is left out
        ChatMessage("assistant", "", tool_calls=(ToolCall("c1", "t", '{"broken": '),)),  # malformed: input {}
    ))
    assert system == "one\n\ntwo"
    assert wire == [{"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "t", "input": {}}]}]
    # System as blocks; tool_result content as blocks; a result without a known call.
    back = from_anthropic_messages([{"type": "text", "text": "sys"}], [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": [{"type": "text", "text": "r"}]}]},
    ])
    assert back == [ChatMessage("system", "sys"), ChatMessage("tool", "r", tool_call_id="x")]


# ─── the table, row by row ──────────────────────────────────────────────────────────────


def test_tool_definitions_parameters_vs_input_schema() -> None:
    assert to_openai_tools((WEATHER,)) == [{"type": "function", "function": WEATHER}]
    assert to_anthropic_tools((WEATHER,)) == [
        {"name": "get_weather", "description": "Current weather of a city.", "input_schema": WEATHER["parameters"]}
    ]


def test_forced_call_and_other_tool_choices() -> None:
    assert [to_openai_tool_choice(c) for c in ("auto", "none", "required")] == ["auto", "none", "required"]
    assert to_openai_tool_choice("get_weather") == {"type": "function", "function": {"name": "get_weather"}}
    assert [to_anthropic_tool_choice(c) for c in ("auto", "none", "required")] == [{"type": "auto"}, {"type": "none"}, {"type": "any"}]
    assert to_anthropic_tool_choice("get_weather") == {"type": "tool", "name": "get_weather"}


def test_model_calls_and_stop_reason_from_both_wires() -> None:
    """tool_calls vs tool_use blocks; finish_reason "tool_calls" vs stop_reason "tool_use" → one neutral form."""
    calls = [call("call_1", "get_weather", {"city": "Paris"}), call("call_2", "get_weather", {"city": "Oslo"})]
    request = ModelRequest((ChatMessage("user", "weather?"),), tools=(WEATHER,))
    responses = {}
    with FakeServer() as server:
        for name, provider_class in (("openai", OpenAIProvider), ("anthropic", AnthropicProvider)):
            wire = WIRES[name]
            server.script(wire.reply("Checking.", calls, split_at=3))
            provider = provider_class(ModelSpec(**wire.model_entry(server.url)))
            responses[name] = asyncio.run(provider.request(request))
    for response in responses.values():
        assert response.finish_reason == "tool_calls"
        assert response.text == "Checking."
        assert response.tool_calls == tuple(ToolCall(*c) for c in calls)  # parallel calls, in order
